/**
 * Where an archived receipt lives in R2 (docs/storage.md#archive): one object per app user, chain,
 * month and shard, `users/<user key>/<chain_id>/<yyyy-mm>/<shard>.ndjson`, one line per receipt,
 * sorted by receipt_id. The user key is the hex of the app user's keyed hash (the pseudonym of
 * src/shared/audit-hash-key.ts), never the app_user_id: an object key is logged and traced
 * wherever R2 is called (a trace's `cloudflare.r2.request.key`), which no erasure reaches, and a
 * hash has one length, so that a long app_user_id cannot push a key past R2's 1,024 bytes.
 *
 * The key serves the three things the archive must do cheaply: the move writes an object per
 * user's month rather than per receipt; a point delete names its object from the request's headers
 * and the receipt_id (its UUIDv7 time gives the month, its tag the shard) without a list or an
 * index; and an erasure deletes everything under one user's prefix. The shard in the key means
 * only that shard's move and deletes ever rewrite an object, so two shards never race on one key.
 *
 * Objects written before the user key, under `receipts/<app_user_id>/…` ({@link LEGACY_PREFIX}),
 * are renamed by the move (src/storage/archive/legacy.ts); nothing else calls R2 with such a key,
 * which names its app user wherever the call is traced.
 */
import { timeOfId } from "../../shared/shard-ids.ts";

/** One archived receipt: the row the shard held, with the body as it was stored. */
export interface ArchivedReceipt {
  receipt_id: string;
  chain_id: string;
  client_id: string;
  app_user_id: string;
  created_at: string;
  /** The receipt as added, stored as the JSON text the shard held. */
  body: string;
  /** Only for a receipt added in a published format (docs/api.md#dr-retail): its format, such as `dr-retail/v1.1`. */
  format?: string;
  /** Only beside `format`: the JSON text of the receipt in our model. */
  mapped?: string;
}

/** Where the objects of the first layout lie, each under `receipts/<URL-encoded app_user_id>/`. */
export const LEGACY_PREFIX = "receipts/";

/**
 * The prefix under which every archived receipt of one app user lies, whatever chain or shard:
 * `userKey` is their pseudonym (`hmac-sha256:<hex>`), of which the key keeps the hex.
 */
export function archiveUserPrefix(userKey: string): string {
  return `users/${userKey.slice(userKey.indexOf(":") + 1)}/`;
}

/** The prefix of one app user's objects in the first layout, named by the app_user_id itself. */
export function legacyUserPrefix(appUserId: string): string {
  return `${LEGACY_PREFIX}${encodeURIComponent(appUserId)}/`;
}

/** The object holding an archived receipt of this app user (their pseudonym `userKey`) and chain on this shard. */
export function archiveObjectKey(userKey: string, chainId: string, receiptId: string, shard: string): string {
  return objectUnder(archiveUserPrefix(userKey), chainId, receiptId, shard);
}

/** The object that held such a receipt in the first layout (the rename's tests make such objects). */
export function legacyObjectKey(appUserId: string, chainId: string, receiptId: string, shard: string): string {
  return objectUnder(legacyUserPrefix(appUserId), chainId, receiptId, shard);
}

/** The shard whose receipts an object holds: the last part of its key, in either layout. */
export function shardOfObjectKey(key: string): string {
  return key.slice(key.lastIndexOf("/") + 1, -".ndjson".length);
}

function objectUnder(userPrefix: string, chainId: string, receiptId: string, shard: string): string {
  return `${userPrefix}${encodeURIComponent(chainId)}/${monthOfId(receiptId)}/${shard}.ndjson`;
}

/**
 * The archive's cutoff at `now` for the archive age `archiveAfterMs` (ARCHIVE_AFTER_DAYS): the
 * move takes the receipts made before it. It is the first instant (UTC) of the month that holds
 * `now` less the age, so a receipt waits until every receipt of its month, and so of its object,
 * is at least the age old, and the month moves in one run: each object is put once, not once a
 * receipt as day by day (docs/scale.md §10). D1 then keeps from the age to the age and a month.
 *
 * An age of 0 is apart: the cutoff is `now`, every receipt moves at the next run. Tests and
 * probes set it to have everything archived at once, and the month rule would leave the current
 * month's receipts out, which no age asked for.
 */
export function archiveCutoff(now: Date, archiveAfterMs: number): Date {
  if (archiveAfterMs === 0) return now;
  const aged = new Date(now.getTime() - archiveAfterMs);
  return new Date(Date.UTC(aged.getUTCFullYear(), aged.getUTCMonth(), 1));
}

/**
 * When a receipt made at `createdAt` falls before {@link archiveCutoff}: the archive age after
 * the end of its month (after `createdAt` itself for an age of 0). The status measures how far
 * the archive is behind from it.
 */
export function archiveDueAt(createdAt: Date, archiveAfterMs: number): Date {
  if (archiveAfterMs === 0) return createdAt;
  return new Date(Date.UTC(createdAt.getUTCFullYear(), createdAt.getUTCMonth() + 1, 1) + archiveAfterMs);
}

/** The UTC month (`yyyy-mm`) of a UUIDv7's time stamp: the month its receipt was made. */
export function monthOfId(id: string): string {
  return new Date(timeOfId(id)).toISOString().slice(0, 7);
}

/**
 * An object's text: one JSON line per receipt, sorted by receipt_id and each receipt once, so
 * that a re-run of a move writes the same bytes.
 */
export function archiveText(receipts: Iterable<ArchivedReceipt>): string {
  const byId = new Map<string, ArchivedReceipt>();
  for (const receipt of receipts) byId.set(receipt.receipt_id, receipt);
  return [...byId.keys()]
    .sort()
    .map((id) => `${JSON.stringify(byId.get(id))}\n`)
    .join("");
}

/** The receipts of an object's text. */
export function archivedReceipts(text: string): ArchivedReceipt[] {
  return text
    .split("\n")
    .filter((line) => line !== "")
    .map((line) => JSON.parse(line) as ArchivedReceipt);
}
