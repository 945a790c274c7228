/**
 * A receipt's events at request time (docs/api.md#receipt-events): add and delete make them,
 * record them in the same transaction as the change, and hand them to the queue after the
 * response. The cron jobs in scheduled.ts send whatever this hand-over left behind.
 */
import { v7 as uuidv7 } from "uuid";
import type { ApiEnv } from "../shared/env.ts";
import { describeError, logLine } from "../shared/log.ts";
import type { CreationNotice, DeletionNotice, QueuedNotice } from "../shared/types.ts";
import { idOnShard, type Shard } from "../storage/shards.ts";

/**
 * The event of one stored receipt, recorded on the receipt's shard with the receipt itself; its
 * time is the receipt's created_at, and its event_id names the shard. The event_id is made in the
 * millisecond of the receipt_id (both at created_at): the outbox, which keeps no index by
 * receipt, finds a receipt's created event by that (src/storage/outbox/statements.ts).
 */
export function newCreationNotice(
  receipt: { receipt_id: string; app_user_id: string; chain_id: string; client_id: string; created_at: string },
  shard: Shard,
): CreationNotice {
  return {
    event_id: idOnShard(uuidv7({ msecs: Date.parse(receipt.created_at) }), shard),
    type: "receipt.created",
    occurred_at: receipt.created_at,
    receipt_id: receipt.receipt_id,
    app_user_id: receipt.app_user_id,
    chain_id: receipt.chain_id,
    client_id: receipt.client_id,
    created_at: receipt.created_at,
  };
}

/**
 * The event of one deletion, recorded on the receipt's shard. Its event_id is new per deletion,
 * kept for every retry, and names that shard, so the notifier finds its outbox row.
 */
export function newDeletionNotice(
  receipt: { receipt_id: string; app_user_id: string; chain_id: string; client_id: string },
  shard: Shard,
  now = new Date(),
): DeletionNotice {
  return {
    // UUIDv7: time-ordered, so outbox rows append to the primary key's b-tree. Made in the
    // millisecond of occurred_at, which the audit record keeps: how an erasure finds the event.
    event_id: idOnShard(uuidv7({ msecs: now.getTime() }), shard),
    type: "receipt.deleted",
    occurred_at: now.toISOString(),
    receipt_id: receipt.receipt_id,
    app_user_id: receipt.app_user_id,
    chain_id: receipt.chain_id,
    client_id: receipt.client_id,
  };
}

/**
 * Sends a recorded event to the queue as one message. Runs after the response, so it never
 * throws. It writes nothing to D1, so that the change's batch is the request's only D1 write:
 * the notifier's claim marks the event's arrival, and an event that no delivery claimed within
 * the grace period (its send failed, or its copy was lost) is sent again by the cron job; a
 * copy that arrives after all is recognised by the claim and not pushed twice.
 */
export async function enqueueNotice(env: Pick<ApiEnv, "NOTICES">, notice: QueuedNotice): Promise<void> {
  try {
    await env.NOTICES.send(notice, { contentType: "json" });
  } catch (error) {
    logLine("warn", "notice-enqueue", { event_id: notice.event_id, outcome: "send failed; cron re-sends", cause: describeError(error) });
  }
}
