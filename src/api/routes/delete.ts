/** POST /receipts/v2/delete (docs/api.md#delete, #delete-errors, #receipt-states). */
import type { DeleteResponse } from "../../shared/schemas.ts";
import { describeError, logLine } from "../../shared/log.ts";
import { purgeArchivedLines } from "../../storage/archive/deletion.ts";
import type { ReceiptOwner } from "../../storage/receipts.ts";
import { removeReceipt } from "../../storage/removal.ts";
import { shardOfId, shardsOf } from "../../storage/shards.ts";
import type { ApiContext } from "../context.ts";
import type { RouteContext } from "../context.ts";
import type { ApiError } from "../errors.ts";
import { overloadRefused } from "../overload.ts";
import { jsonResponse } from "../responses.ts";
import { REFUSALS, receiptFieldsDiffer, refuse } from "../refusals.ts";
import { enqueueNotice, newDeletionNotice } from "../events.ts";
import { userKeyOf } from "../user-key.ts";

/** The fields a receipt must share with the request, in the order messages name them. */
const OWNER_FIELDS = ["client_id", "chain_id", "app_user_id"] as const satisfies readonly (keyof ReceiptOwner)[];

/**
 * Removes a receipt and records the notice to its app user and the audit record in one atomic
 * step; the notice goes to the queue after the response. Nothing changes unless every check of docs/api.md#delete passes.
 */
export async function deleteReceipt(c: RouteContext<"delete">): Promise<Response> {
  const { headers } = c.var;

  // The receipt_id names its shard; an ID that names none is unknown, like any other.
  const shard = shardOfId(shardsOf(c.env), headers.receipt_id);
  if (!shard) throw refusal(headers, null);
  c.set("shard", shard.name);
  const notice = newDeletionNotice(headers, shard);
  const userKey = await userKeyOf(c.get("isolate"), c.get("config"), headers.app_user_id);
  const removal = await removeReceipt(shard, notice, userKey, c.get("requestId")).catch(overloadRefused("delete"));
  if (removal.outcome === "no receipt") throw refusal(headers, null);
  if (removal.outcome === "fields differ") throw refusal(headers, removal.receipt);

  c.executionCtx.waitUntil(enqueueNotice(c.env, notice));
  if (removal.archivedObject) c.executionCtx.waitUntil(purgeAfterAnswer(c, shard.db, removal.archivedObject, notice.receipt_id));
  const body: DeleteResponse = {
    message: `Receipt ${headers.receipt_id} was deleted and the app user notified.`,
    status: "OK",
    status_code: 200,
  };
  return jsonResponse(body, 200);
}

// The archived line leaves R2 now; should this fail, the cron's sweep finishes it within minutes.
async function purgeAfterAnswer(c: ApiContext, db: D1Database, objectKey: string, receiptId: string): Promise<void> {
  try {
    await purgeArchivedLines(db, c.env.ARCHIVE, objectKey, new Date());
  } catch (error) {
    logLine("warn", "archive-purge", { receipt_id: receiptId, outcome: "failed; the sweep purges", cause: describeError(error) });
  }
}

function refusal(headers: ReceiptOwner & { receipt_id: string }, receipt: ReceiptOwner | null): ApiError {
  if (!receipt) {
    return refuse(REFUSALS.noReceipt, "no receipt");
  }
  const differing = differingFields(receipt, headers);
  // The batch read and deleted in one transaction; a match that was not deleted is a fault (500).
  if (differing.length === 0) throw new Error("receipt matched every field yet was not deleted");
  // The receipt's own values are not shown: they belong to another client, chain or app user.
  return refuse(receiptFieldsDiffer(differing), `receipt fields differ: ${differing.join(", ")}`);
}

// Naming which of chain_id and app_user_id differ on another client's receipt would let its holder
// confirm guesses of that receipt's chain and app user, so client_id is then named alone.
function differingFields(receipt: ReceiptOwner, headers: ReceiptOwner): readonly (keyof ReceiptOwner)[] {
  return receipt.client_id !== headers.client_id
    ? ["client_id"]
    : OWNER_FIELDS.filter((field) => receipt[field] !== headers[field]);
}
