/** POST /receipts/v2/delete (seed §3, §4.3, §7.2; contract §4). */
import { deleteHeaders, type DeleteResponse } from "../../shared/schemas.ts";
import { deleteReceiptWithNotice, type ReceiptOwner } from "../../storage/notices.ts";
import { authenticateClient } from "../auth/bearer.ts";
import type { ApiContext } from "../context.ts";
import { ApiError, jsonResponse } from "../errors.ts";
import { readHeaders } from "../headers.ts";
import { enqueueNotice, newDeletionNotice } from "../notices.ts";

/** The fields a receipt must share with the request, in the order messages name them. */
const OWNER_FIELDS = ["client_id", "chain_id", "app_user_id"] as const satisfies readonly (keyof ReceiptOwner)[];

/**
 * Removes a receipt and records the notice to its app user in one atomic step; the notice goes
 * to the queue after the response. Nothing changes unless every check of contract §4 passes.
 */
export async function deleteReceipt(c: ApiContext): Promise<Response> {
  const headers = readHeaders(c.req.raw, deleteHeaders);
  c.set("clientId", headers.client_id);
  await authenticateClient(c, { authorization: headers.Authorization, client_id: headers.client_id });

  const notice = newDeletionNotice(headers);
  const outcome = await deleteReceiptWithNotice(c.env.DB, notice);
  if (!outcome.deleted) throw refusal(headers, outcome.receipt);

  c.executionCtx.waitUntil(enqueueNotice(c.env, notice));
  const body: DeleteResponse = {
    message: `Receipt ${headers.receipt_id} was deleted and the app user notified.`,
    status: "OK",
    status_code: 200,
  };
  return jsonResponse(body, 200);
}

function refusal(headers: ReceiptOwner & { receipt_id: string }, receipt: ReceiptOwner | null): ApiError {
  if (!receipt) {
    return new ApiError(406, "Header receipt_id: no receipt exists under this ID.", { cause: "no receipt" });
  }
  // Naming which of chain_id and app_user_id differ on another client's receipt would let its holder
  // confirm guesses of that receipt's chain and app user, so client_id is then named alone.
  const differing =
    receipt.client_id !== headers.client_id
      ? (["client_id"] as const)
      : OWNER_FIELDS.filter((field) => receipt[field] !== headers[field]);
  // The batch read and deleted in one transaction; a match that was not deleted is a fault (500).
  if (differing.length === 0) throw new Error("receipt matched every field yet was not deleted");
  const names = differing.join(", ");
  // The receipt's own values are not shown: they belong to another client, chain or app user.
  return new ApiError(
    406,
    differing.length === 1
      ? `Header ${names} does not match the receipt's ${names}.`
      : `Headers ${names} do not match the receipt's ${names}.`,
    { cause: `receipt fields differ: ${names}` },
  );
}
