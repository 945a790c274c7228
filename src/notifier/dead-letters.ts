/**
 * The dead-letter queue's consumer: keeps each event that could not be delivered in D1, with its
 * last error, where `npm run notices -- failed` lists it and `replay` sends it again. Only an
 * event whose retrying is over is one: a message also comes here when it met the queue's retries,
 * which count a copy's reasons of its own (held by another delivery, a claim run out behind a slow
 * push service, a D1 failure), and an event still within its retry window stays in the outbox, to
 * its schedule. A bundle of the cron's is not a dead letter of its own either: its events go back
 * to the notices queue one by one.
 */
import type { NotifierEnv } from "../shared/env.ts";
import { describeError, logLine } from "../shared/log.ts";
import { receiptOf, type NoticeBundle, type QueuedNotice } from "../shared/types.ts";
import { deadLetter } from "../storage/outbox/operations.ts";
import { shardOfId, shardsOf } from "../storage/shards.ts";

/** The dead-letter queue's name, as src/notifier/wrangler.jsonc declares it. */
export const FAILED_NOTICES_QUEUE = "receipts-v2-notices-failed";

/**
 * Stores the event of one dead-lettered message whose retrying is over (a window of `windowMs`)
 * and acks it; acks one still within its window, leaving it to its schedule; retries it if D1
 * fails, so none is dropped.
 */
export async function storeDeadLetter(message: Message<QueuedNotice>, env: NotifierEnv, windowMs: number, now = new Date()): Promise<void> {
  const { event_id } = message.body;
  const receipt_id = receiptOf(message.body);
  try {
    // Only a shard's binding removed while its events were on their way names none: retried
    // until the binding is back.
    const shard = shardOfId(shardsOf(env), event_id);
    if (!shard) throw new Error(`event_id names no shard of this Worker: ${event_id}`);
    const outcome = await deadLetter(shard.db, event_id, now, windowMs);
    logLine(outcome === "failed" ? "error" : "info", "notice-failed", { event_id, receipt_id, outcome: DEAD_LETTER_OUTCOMES[outcome] });
    message.ack();
  } catch (error) {
    logLine("error", "notice-failed", { event_id, receipt_id, outcome: "store failed; retried", cause: describeError(error) });
    message.retry({ delaySeconds: 30 });
  }
}

const DEAD_LETTER_OUTCOMES = {
  failed: "stored as failed notice",
  scheduled: "not stored: within its retry window, left to its schedule",
  erased: "not stored: a later erasure of its app user took it",
  gone: "nothing to store (delivered, or stored before)",
} as const;

/**
 * Sends each event of a bundle that met its queue retries back to the notices queue as a message
 * of its own, and acks the bundle; retries it if the send fails. A bundle's retries count every
 * event's together (a D1 failure of one, another's claim held by a copy, the next one's claim
 * running out), and each retry takes the bundle whole: ten events meet the queue's retries far
 * sooner than any one of them would, and stored as failed they would leave their outbox schedule
 * for an operator's list. Alone, an event that meets its own retries is a dead letter; one
 * delivered meanwhile is acked as a duplicate.
 */
export async function unbundle(message: Message<NoticeBundle>, env: NotifierEnv): Promise<void> {
  const { events } = message.body;
  try {
    await env.NOTICES.sendBatch(events.map((body) => ({ body, contentType: "json" })));
    logLine("warn", "notice-failed", { events: events.length, outcome: "bundle met its retries; its events queued one by one" });
    message.ack();
  } catch (error) {
    logLine("error", "notice-failed", { events: events.length, outcome: "bundle's events not queued; retried", cause: describeError(error) });
    message.retry({ delaySeconds: 30 });
  }
}
