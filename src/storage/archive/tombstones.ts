/**
 * Every statement on `archive_tombstones` (migration 0008, docs/storage.md#archive-tombstones):
 * the shard's record that an archived receipt is gone. A tombstone is written in the same batch as
 * the deletion's event and audit record; its `purged_at` is set once the receipt's line has left
 * its object in R2. This file stays free of Workers types: the erasure runs on Node too.
 */
import { exportHeld } from "../export.ts";
import { statement, type Statement } from "../statement.ts";
import { archivedOwned, type FencedOwner } from "./owners.ts";

/**
 * How long a purged tombstone is kept: long enough that a re-run of the move over the same
 * month, which rewrites objects from D1 and knows gone receipts only by their tombstones, finds
 * it; the move copies receipts past the archive age once, so a week past a purge is ample.
 */
export const PURGED_TOMBSTONE_KEPT_MS = 7 * 24 * 60 * 60 * 1000;

/**
 * An SQL expression, 1 when the receipt whose ID is the parameter `receiptIdParam` has a
 * tombstone, else 0: an erasure counts a line so marked as deleted, not erased.
 */
export function tombstoned(receiptIdParam: string): string {
  return `EXISTS (SELECT 1 FROM archive_tombstones WHERE receipt_id = ${receiptIdParam})`;
}

/**
 * The tombstone of an archived receipt deleted at `deletedAt`, only while its owner row has the
 * owner's fields: in delete's batch after the event and the audit record, which carry the same
 * condition, and before the row's removal, so that a second delete (or a retry of this one after
 * it committed) changes nothing, and the change count says whether this request made it.
 */
export function insertTombstone(owner: FencedOwner, objectKey: string, deletedAt: string): Statement {
  const condition = archivedOwned({ receiptId: "?1", clientId: "?4", chainId: "?5", appUserId: "?6", userKey: "?7", createdAt: "?8" });
  return statement(
    `INSERT INTO archive_tombstones (receipt_id, object_key, deleted_at)
    SELECT ?1, ?2, ?3 WHERE ${condition}
    ON CONFLICT (receipt_id) DO NOTHING`,
    owner.receipt_id,
    objectKey,
    deletedAt,
    owner.client_id,
    owner.chain_id,
    owner.app_user_id,
    owner.user_key,
    owner.created_at,
  );
}

/**
 * The receipts of an object whose lines still await their purge, none while an export holds the
 * object's app user: an export reads a line deleted after its instant from the object
 * (src/storage/export.ts), so the purge waits for its hold to go. Rows: `receipt_id`.
 */
export function unpurgedOfObject(objectKey: string): Statement {
  return statement(
    `SELECT receipt_id FROM archive_tombstones WHERE object_key = ?1 AND purged_at IS NULL AND NOT ${exportHeld(OBJECT_USER_KEY)}`,
    objectKey,
  );
}

// The user key of the object `object_key` names: the keyed hash's hex is its second part.
const OBJECT_USER_KEY = "'hmac-sha256:' || substr(object_key, 7, 64)";

/** The purge of these receipts' lines from their object happened at `at`. */
export function markPurged(receiptIds: readonly string[], at: Date): Statement {
  return statement(
    "UPDATE archive_tombstones SET purged_at = ?2 WHERE receipt_id IN (SELECT value FROM json_each(?1)) AND purged_at IS NULL",
    JSON.stringify(receiptIds),
    at.toISOString(),
  );
}

/**
 * Up to `limit` objects holding lines to purge whose oldest tombstone dates from before
 * `deletedBefore`: left by a purge after the answer that was cut off, or recorded by the move for
 * a receipt deleted while it was copied. Rows: `object_key`.
 */
export function objectsToPurge(deletedBefore: Date, limit: number): Statement {
  return statement(
    `SELECT object_key FROM archive_tombstones WHERE purged_at IS NULL AND NOT ${exportHeld(OBJECT_USER_KEY)}
    GROUP BY object_key HAVING MIN(deleted_at) < ?1 LIMIT ?2`,
    deletedBefore.toISOString(),
    limit,
  );
}

/**
 * A row when a move of this shard started within the last day and has not finished: it may be
 * rewriting any of the shard's objects. A run stopped for good counts no longer after a day.
 */
export function runInFlight(now: Date): Statement {
  return statement(
    "SELECT 1 FROM archive_runs WHERE finished_at IS NULL AND started_at > ?1 LIMIT 1",
    new Date(now.getTime() - 24 * 60 * 60 * 1000).toISOString(),
  );
}

/** Up to `rows` tombstones purged before `cutoff` (see {@link PURGED_TOMBSTONE_KEPT_MS}). */
export function deleteOldTombstones(cutoff: Date, rows: number): Statement {
  return statement(
    `DELETE FROM archive_tombstones WHERE receipt_id IN
    (SELECT receipt_id FROM archive_tombstones WHERE purged_at < ?1 LIMIT ?2)`,
    cutoff.toISOString(),
    rows,
  );
}

/**
 * Up to `limit` tombstones of objects under `prefix` (an app user's, src/storage/archive/layout.ts
 * `archiveUserPrefix`): their object_key names the app user, and an erasure leaves no readable
 * copy. An unpurged one still tells a deleted line from an erased one, so D1's pages of an
 * erasure take `purgedOnly`, and its archive pass the rest once it has counted the lines. Returns
 * a row per tombstone removed.
 */
export function eraseTombstonesUnder(prefix: string, limit: number, { purgedOnly }: { purgedOnly: boolean }): Statement {
  // Every key under a prefix that ends in "/" sorts from the prefix to below "/"'s successor "0".
  return statement(
    `DELETE FROM archive_tombstones WHERE receipt_id IN (SELECT receipt_id FROM archive_tombstones
      WHERE object_key >= ?1 AND object_key < ?2${purgedOnly ? " AND purged_at IS NOT NULL" : ""} LIMIT ?3) RETURNING 1`,
    prefix,
    `${prefix.slice(0, -1)}0`,
    limit,
  );
}

/**
 * The tombstones of lines that a rename of the first layout (src/storage/archive/legacy.ts) moved
 * from `from` to `to`: they name the new object, and each goes back to unpurged, so that a line
 * the rename brought back after its purge leaves again at the next sweep.
 */
export function retargetTombstones(from: string, to: string, receiptIds: readonly string[]): Statement {
  return statement(
    `UPDATE archive_tombstones SET object_key = ?2,
      purged_at = iif(receipt_id IN (SELECT value FROM json_each(?3)), NULL, purged_at)
    WHERE object_key = ?1 OR receipt_id IN (SELECT value FROM json_each(?3))`,
    from,
    to,
    JSON.stringify(receiptIds),
  );
}
