/**
 * The dead-letter queue's consumer: keeps each event that could not be delivered in D1, with its
 * last error, where `npm run notices -- failed` lists it and `replay` sends it again.
 */
import type { NotifierEnv } from "../shared/env.ts";
import { describeError, logLine } from "../shared/log.ts";
import { receiptOf, type QueuedNotice } from "../shared/types.ts";
import { deadLetter } from "../storage/outbox/operations.ts";
import { shardOfId, shardsOf } from "../storage/shards.ts";

/** The dead-letter queue's name, as src/notifier/wrangler.toml declares it. */
export const FAILED_NOTICES_QUEUE = "receipts-v2-notices-failed";

/** Stores the event of one dead-lettered message and acks it; retries it if D1 fails, so none is dropped. */
export async function storeDeadLetter(message: Message<QueuedNotice>, env: NotifierEnv, now = new Date()): Promise<void> {
  const { event_id } = message.body;
  const receipt_id = receiptOf(message.body);
  try {
    // Only a shard's binding removed while its events were on their way names none: retried
    // until the binding is back.
    const shard = shardOfId(shardsOf(env), event_id);
    if (!shard) throw new Error(`event_id names no shard of this Worker: ${event_id}`);
    const stored = await deadLetter(shard.db, event_id, now);
    logLine(stored ? "error" : "info", "notice-failed", {
      event_id,
      receipt_id,
      outcome: stored ? "stored as failed notice" : "nothing to store (delivered, or stored before)",
    });
    message.ack();
  } catch (error) {
    logLine("error", "notice-failed", { event_id, receipt_id, outcome: "store failed; retried", cause: describeError(error) });
    message.retry({ delaySeconds: 30 });
  }
}
