/**
 * Delete of an archived receipt (docs/api.md#delete, docs/storage.md#archive-tombstones): a
 * receipt the move took out of its shard, whose owner row matches the request's headers, is
 * deleted with the same answer, the same `receipt.deleted` event
 * and the same audit record as a live receipt's, in one D1 batch on its shard with the tombstone
 * that makes it gone at once.
 * Its line leaves the object right after the answer ({@link purgeArchivedLines}), or at the
 * cron's next sweep ({@link sweepTombstones}).
 */
import { timeOfId } from "../../shared/shard-ids.ts";
import type { DeletionNotice } from "../../shared/types.ts";
import { auditArchivedDeletionIfOwned } from "../audit.ts";
import { eventRecorded, recordDeletedIfArchivedOwned } from "../outbox/statements.ts";
import type { DeleteOutcome } from "../receipts.ts";
import { bound, runBatch, statement } from "../statement.ts";
import { runOnShard, type ShardDb } from "../transient.ts";
import { archiveObjectKey, archiveText, archivedReceipts } from "./layout.ts";
import { putObject, readObject } from "./objects.ts";
import { forgetTombstonedOwner } from "./owners.ts";
import { insertTombstone, markPurged, objectsToPurge, deleteOldTombstones, runInFlight, unpurgedOfObject } from "./tombstones.ts";

/** A delete of an archived receipt: the outcome, and the object whose line is to go once deleted. */
export type ArchivedDeleteOutcome = DeleteOutcome & { objectKey?: string };

/**
 * Deletes the archived receipt that `notice` names on its shard (whose D1 `db` holds no row of it,
 * and an owner row, src/storage/archive/owners.ts, with the notice's client_id, chain_id and
 * app_user_id), as {@link deleteOwnedReceipt} deletes a live one: records the event, the audit
 * record and the tombstone and drops the owner row in one batch, the first three under the
 * condition that the owner row is still there and no erasure's fence of `userKey` (the app user's
 * pseudonym) covers the receipt, so that of two racing deletes exactly one writes them, and a
 * delete that an erasure overtook, or is on its way to, writes nothing. No R2 call: the owner row
 * answers for the receipt, its created_at is its ID's time, and the tombstone names the object
 * from the headers and the ID. So a delete never names an object of the first layout, whose key
 * names the app user (src/storage/archive/legacy.ts): a line still there is renamed with its
 * tombstone unpurged, and leaves at the next sweep.
 */
export async function deleteArchivedReceipt(
  shard: ShardDb,
  notice: DeletionNotice,
  userKey: string,
  requestId: string,
): Promise<ArchivedDeleteOutcome> {
  const key = archiveObjectKey(userKey, notice.chain_id, notice.receipt_id, shard.name);
  const createdAt = new Date(timeOfId(notice.receipt_id)).toISOString();
  const owner = { ...notice, user_key: userKey, created_at: createdAt };
  const [before, , , tombstone] = await runOnShard(shard, [
    statement(`SELECT ${eventRecorded("?1")} AS recorded`, notice.event_id),
    recordDeletedIfArchivedOwned(notice, userKey, createdAt),
    auditArchivedDeletionIfOwned(owner, notice.occurred_at, requestId),
    insertTombstone(owner, key, notice.occurred_at),
    // The tombstone answers for the receipt from now on: its owner is no longer kept.
    forgetTombstonedOwner(notice.receipt_id),
  ]);
  const recorded = (before!.results[0] as { recorded: number }).recorded === 1;
  // A second delete, or one that lost a race or an erasure: the receipt is gone, as a live one would be.
  if (tombstone!.meta.changes !== 1 && !recorded) return { deleted: false, receipt: null };
  return { deleted: true, objectKey: key };
}

/**
 * Rewrites `objectKey` without the lines of its unpurged tombstones, then marks them purged;
 * returns how many. The rewrite is a put conditional on the ETag read, so a move or another purge
 * that rewrote the object meanwhile wins, and the sweep tries again. An object left empty is
 * deleted, which R2 cannot make conditional: only while no move of the shard is running (a move
 * may be appending to it), else it is emptied and left to a later sweep.
 */
export async function purgeArchivedLines(db: D1Database, archive: R2Bucket, objectKey: string, now: Date): Promise<number> {
  const [gone, running] = await runBatch(db, [unpurgedOfObject(objectKey), runInFlight(now)]);
  const ids = new Set((gone!.results as { receipt_id: string }[]).map(({ receipt_id }) => receipt_id));
  if (ids.size === 0) return 0;
  const { existing, text } = await readObject(archive, objectKey);
  if (existing) {
    const kept = archivedReceipts(text).filter(({ receipt_id }) => !ids.has(receipt_id));
    const moveRunning = running!.results.length > 0;
    if (kept.length === 0 && !moveRunning) {
      await archive.delete(objectKey);
    } else {
      const written = await putObject(archive, objectKey, archiveText(kept), { etagMatches: existing.etag });
      if (!written || kept.length === 0) return 0;
    }
  }
  await bound(db, markPurged([...ids], now)).run();
  return ids.size;
}

/** Objects one sweep of a shard purges at most: a purge is three D1 queries and two R2 calls. */
export const SWEEP_OBJECTS = 5;

/** D1 queries of one {@link sweepTombstones}: the list, then a purge's batch of two and its update per object. */
export const SWEEP_TOMBSTONE_QUERIES = 1 + SWEEP_OBJECTS * 3;

// A tombstone younger than this is left to the purge after its delete's answer, still running.
const SWEEP_GRACE_MS = 5 * 60 * 1000;

/**
 * The cron's sweep of one shard: finishes the purge of tombstones older than a few minutes whose
 * line is still in R2 (a purge after the answer that was cut off or lost a race, or a tombstone
 * the move recorded), a few objects a run. Returns how many lines it purged.
 */
export async function sweepTombstones(db: D1Database, archive: R2Bucket, now: Date): Promise<number> {
  const { results } = await bound(db, objectsToPurge(new Date(now.getTime() - SWEEP_GRACE_MS), SWEEP_OBJECTS)).all<{ object_key: string }>();
  let purged = 0;
  for (const { object_key } of results) purged += await purgeArchivedLines(db, archive, object_key, now);
  return purged;
}

/** Cron job: deletes up to `limit` tombstones purged before `cutoff`, one statement; returns how many. */
export async function purgeOldTombstones(db: D1Database, cutoff: Date, limit: number): Promise<number> {
  return (await bound(db, deleteOldTombstones(cutoff, limit)).run()).meta.changes;
}
