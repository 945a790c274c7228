/**
 * Delete of an archived receipt (docs/api.md#delete, docs/storage.md#archive-tombstones): a
 * receipt the move took out of its shard, whose owner row matches the request's headers, is read
 * from the object they name, and its deletion is the same answer, the same `receipt.deleted` event
 * and the same audit record as a live receipt's, in one D1 batch on its shard with the tombstone
 * that makes it gone at once.
 * Its line leaves the object right after the answer ({@link purgeArchivedLines}), or at the
 * cron's next sweep ({@link sweepTombstones}).
 */
import type { DeletionNotice } from "../../shared/types.ts";
import { auditArchivedDeletionIfOwned } from "../audit.ts";
import { eventRecorded, recordDeletedIfArchivedOwned } from "../outbox/statements.ts";
import type { DeleteOutcome } from "../receipts.ts";
import { bound, runBatch, statement } from "../statement.ts";
import { retryTransient } from "../transient.ts";
import { archiveObjectKey, archiveText, archivedReceipts, legacyObjectKey, type ArchivedReceipt } from "./layout.ts";
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
 * delete that an erasure overtook, or is on its way to, writes nothing. The owner row matching,
 * the object the headers name holds the line: one R2 read (two while the first layout's object
 * is not renamed yet, src/storage/archive/legacy.ts), whose fields the event and record carry.
 */
export async function deleteArchivedReceipt(
  db: D1Database,
  archive: R2Bucket,
  shardName: string,
  notice: DeletionNotice,
  userKey: string,
  requestId: string,
): Promise<ArchivedDeleteOutcome> {
  const found =
    (await archivedLine(archive, archiveObjectKey(userKey, notice.chain_id, notice.receipt_id, shardName), notice.receipt_id)) ??
    (await archivedLine(archive, legacyObjectKey(notice.app_user_id, notice.chain_id, notice.receipt_id, shardName), notice.receipt_id));
  // The owner row matched, yet the line is gone: a racing delete purged it, or an erasure deleted
  // its object, since; the receipt is gone, as a live one would be.
  if (!found) return { deleted: false, receipt: null };
  const { key, line } = found;
  const owner = { ...notice, user_key: userKey, created_at: line.created_at };
  return retryTransient(async () => {
    const [before, , , tombstone] = await runBatch(db, [
      statement(`SELECT ${eventRecorded("?1")} AS recorded`, notice.event_id),
      recordDeletedIfArchivedOwned(notice, userKey, line.created_at),
      auditArchivedDeletionIfOwned(owner, notice.occurred_at, requestId),
      insertTombstone(owner, key, notice.occurred_at),
      // The tombstone answers for the receipt from now on: its owner is no longer kept.
      forgetTombstonedOwner(notice.receipt_id),
    ]);
    const recorded = (before!.results[0] as { recorded: number }).recorded === 1;
    // A second delete, or one that lost a race: the receipt is gone, as a live one would be.
    if (tombstone!.meta.changes !== 1 && !recorded) return { deleted: false, receipt: null };
    return { deleted: true, objectKey: key };
  });
}

async function archivedLine(archive: R2Bucket, key: string, receiptId: string): Promise<{ key: string; line: ArchivedReceipt } | undefined> {
  const object = await archive.get(key);
  const line = object ? archivedReceipts(await object.text()).find(({ receipt_id }) => receipt_id === receiptId) : undefined;
  return line && { key, line };
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
  const object = await archive.get(objectKey);
  if (object) {
    const kept = archivedReceipts(await object.text()).filter(({ receipt_id }) => !ids.has(receipt_id));
    const moveRunning = running!.results.length > 0;
    if (kept.length === 0 && !moveRunning) {
      await archive.delete(objectKey);
    } else {
      const written = await archive.put(objectKey, archiveText(kept), { onlyIf: { etagMatches: object.etag } });
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
