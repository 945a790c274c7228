/**
 * Delete of an archived receipt (docs/api.md#delete, docs/storage.md#archive-tombstones): a
 * receipt the move took out of its shard is found in R2 by the request's headers and its ID, and
 * its deletion is the same answer, the same `receipt.deleted` event and the same audit record as
 * a live receipt's, in one D1 batch on its shard with the tombstone that makes it gone at once.
 * Its line leaves the object right after the answer ({@link purgeArchivedLines}), or at the
 * cron's next sweep ({@link sweepTombstones}).
 */
import type { DeletionNotice } from "../../shared/types.ts";
import { auditArchivedDeletionIfUntombstoned } from "../audit.ts";
import { eventRecorded, recordDeletedIfUntombstoned } from "../outbox/statements.ts";
import type { DeleteOutcome, ReceiptOwner } from "../receipts.ts";
import { bound, runBatch, statement } from "../statement.ts";
import { retryTransient } from "../transient.ts";
import { archiveObjectKey, archiveText, archiveUserPrefix, archivedReceipts, type ArchivedReceipt } from "./layout.ts";
import { insertTombstone, markPurged, objectsToPurge, deleteOldTombstones, runInFlight, unpurgedOfObject } from "./tombstones.ts";

/** The R2 calls a point delete makes beyond the headers' object: one list, then this many reads at most. */
export const MAX_OTHER_CHAINS = 20;

/** A delete of an archived receipt: the outcome, and the object whose line is to go once deleted. */
export type ArchivedDeleteOutcome = DeleteOutcome & { objectKey?: string };

/**
 * Deletes the archived receipt that `notice` names on the shard `shardName` (whose D1 `db` holds
 * no row of it), as {@link deleteOwnedReceipt} deletes a live one: when its archived line has the
 * notice's client_id, chain_id and app_user_id, records the event, the audit record and the
 * tombstone in one batch, all under the condition that no tombstone exists, so that of two racing
 * deletes exactly one does. Otherwise answers as for a live receipt: no receipt, or its owner.
 *
 * The object the headers name holds the line when they are right; when it does not, the app
 * user's other chains are read (one list), so that a wrong chain_id is named as for a live
 * receipt. A wrong app_user_id names another app user's prefix, where the receipt is not: that
 * answers "no receipt" (docs/api.md#delete-errors says so).
 */
export async function deleteArchivedReceipt(
  db: D1Database,
  archive: R2Bucket,
  shardName: string,
  notice: DeletionNotice,
  requestId: string,
): Promise<ArchivedDeleteOutcome> {
  const found = await findArchived(archive, shardName, notice);
  if (!found) return { deleted: false, receipt: null };
  const owner: ReceiptOwner = { client_id: found.line.client_id, chain_id: found.line.chain_id, app_user_id: found.line.app_user_id };
  if (owner.client_id !== notice.client_id || owner.chain_id !== notice.chain_id || owner.app_user_id !== notice.app_user_id) {
    return { deleted: false, receipt: owner };
  }
  return retryTransient(async () => {
    const [before, , , tombstone] = await runBatch(db, [
      statement(`SELECT ${eventRecorded("?1")} AS recorded`, notice.event_id),
      recordDeletedIfUntombstoned(notice),
      auditArchivedDeletionIfUntombstoned(notice, notice.occurred_at, requestId),
      insertTombstone(notice.receipt_id, found.key, notice.occurred_at),
    ]);
    const recorded = (before!.results[0] as { recorded: number }).recorded === 1;
    // A second delete, or one that lost a race: the receipt is gone, as a live one would be.
    if (tombstone!.meta.changes !== 1 && !recorded) return { deleted: false, receipt: null };
    return { deleted: true, objectKey: found.key };
  });
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

/** The archived line of the notice's receipt and its object, or undefined. */
async function findArchived(
  archive: R2Bucket,
  shardName: string,
  notice: DeletionNotice,
): Promise<{ key: string; line: ArchivedReceipt } | undefined> {
  const key = archiveObjectKey(notice.app_user_id, notice.chain_id, notice.receipt_id, shardName);
  const line = await lineIn(archive, key, notice.receipt_id);
  if (line) return { key, line };
  // The headers' chain_id may be the field that differs: the app user's other chains hold an
  // object of the same month and shard, under the same name after their chain's part.
  const userPrefix = archiveUserPrefix(notice.app_user_id);
  const own = key.slice(userPrefix.length);
  const tail = own.slice(own.indexOf("/"));
  const { delimitedPrefixes } = await archive.list({ prefix: userPrefix, delimiter: "/" });
  for (const chainPrefix of delimitedPrefixes.slice(0, MAX_OTHER_CHAINS)) {
    const other = chainPrefix.slice(0, -1) + tail;
    if (other === key) continue;
    const found = await lineIn(archive, other, notice.receipt_id);
    if (found) return { key: other, line: found };
  }
  return undefined;
}

async function lineIn(archive: R2Bucket, key: string, receiptId: string): Promise<ArchivedReceipt | undefined> {
  const object = await archive.get(key);
  return object ? archivedReceipts(await object.text()).find((line) => line.receipt_id === receiptId) : undefined;
}
