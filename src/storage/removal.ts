/**
 * Delete's one call to storage (docs/api.md#delete, #archived-receipts): the receipt that a
 * deletion's event names, live in its shard or moved to the archive, goes with its event and
 * audit record, or the answer says why not. The owner check and the erasure's fence apply on both
 * paths here (src/storage/ownership.ts), so the route states only the seed's answers.
 */
import type { DeletionNotice } from "../shared/types.ts";
import { deleteArchivedReceipt } from "./archive/deletion.ts";
import { deleteOwnedReceipt, type ReceiptOwner } from "./receipts.ts";
import type { ShardDb } from "./transient.ts";

/** What became of a delete. */
export type Removal =
  /** Gone, its event and audit record recorded; `archivedObject`: the object whose line is to be purged. */
  | { outcome: "deleted"; archivedObject?: string }
  /** No receipt under the ID: never made, deleted, erased, or covered by an erasure under way. */
  | { outcome: "no receipt" }
  /** The receipt is there, but not with the request's client_id, chain_id and app_user_id: its own fields. */
  | { outcome: "fields differ"; receipt: ReceiptOwner };

/**
 * Deletes the receipt `notice` names if every field matches, in one D1 round trip for a live
 * receipt; an archived one whose owner row matches costs a second batch, and no R2 call. Every
 * refusal is answered from D1.
 *
 * @param userKey the pseudonym of the request's app_user_id, which names them in erasure fences.
 * @param requestId the request reference the audit record keeps.
 */
export async function removeReceipt(
  shard: ShardDb,
  notice: DeletionNotice,
  userKey: string,
  requestId: string,
): Promise<Removal> {
  const live = await deleteOwnedReceipt(shard, notice, userKey, requestId);
  if (live.deleted) return { outcome: "deleted" };
  if (live.receipt === null) return { outcome: "no receipt" };
  if (!live.archived || !sameOwner(live.receipt, notice)) return { outcome: "fields differ", receipt: live.receipt };
  const archived = await deleteArchivedReceipt(shard, notice, userKey, requestId);
  return archived.deleted ? { outcome: "deleted", archivedObject: archived.objectKey } : { outcome: "no receipt" };
}

function sameOwner(receipt: ReceiptOwner, notice: ReceiptOwner): boolean {
  return receipt.client_id === notice.client_id && receipt.chain_id === notice.chain_id && receipt.app_user_id === notice.app_user_id;
}
