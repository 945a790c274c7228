/**
 * Where an archived receipt lives in R2 (docs/storage.md#archive): one object per app user, chain,
 * month and shard, `receipts/<app_user_id>/<chain_id>/<yyyy-mm>/<shard>.ndjson`, one line per
 * receipt, sorted by receipt_id.
 *
 * The key serves the three things the archive must do cheaply: the move writes an object per
 * user's month rather than per receipt; a point delete names its object from the request's headers
 * and the receipt_id (its UUIDv7 time gives the month, its tag the shard) without a list or an
 * index; and an erasure deletes everything under one user's prefix. The shard in the key means
 * only that shard's move and deletes ever rewrite an object, so two shards never race on one key.
 */

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

/** The prefix under which every archived receipt of one app user lies, whatever chain or shard. */
export function archiveUserPrefix(appUserId: string): string {
  return `receipts/${encodeURIComponent(appUserId)}/`;
}

/** The object holding an archived receipt of this app user and chain on this shard. */
export function archiveObjectKey(appUserId: string, chainId: string, receiptId: string, shard: string): string {
  return `${archiveUserPrefix(appUserId)}${encodeURIComponent(chainId)}/${monthOfId(receiptId)}/${shard}.ndjson`;
}

/** The UTC month (`yyyy-mm`) of a UUIDv7's time stamp: the month its receipt was made. */
export function monthOfId(id: string): string {
  const millis = Number.parseInt(id.slice(0, 8) + id.slice(9, 13), 16);
  return new Date(millis).toISOString().slice(0, 7);
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
