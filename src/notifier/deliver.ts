/**
 * Delivery of one notice from the notices queue (docs/api.md#receipt-events): at least once, and
 * pushed once per event_id however often the queue hands it over, through a claim on its outbox
 * row; a receipt's created event is never pushed after its deleted event.
 */
import type { NotifierEnv } from "../shared/env.ts";
import { describeError, logLine } from "../shared/log.ts";
import type { ReceiptNotice } from "../shared/types.ts";
import { claimNotice, markDelivered, recordFailure } from "../storage/outbox.ts";
import { shardOfEvent } from "../storage/shards.ts";
import type { PushTarget } from "./config.ts";
import { PUSH_TIMEOUT_MS, pushNotice } from "./push.ts";
import { retryDelaySeconds } from "./retry.ts";

/**
 * How long one delivery holds a notice. Longer than a push may take, so two copies of a message
 * never push at once; short, so a copy whose Worker died frees the notice soon.
 */
export const CLAIM_MS = PUSH_TIMEOUT_MS * 3;

/**
 * Delivers one message and acks or retries it; never throws, so one notice cannot hold up the
 * others of its batch.
 *
 * - delivered already, or no outbox row (purged long after delivery, or dead-lettered): ack;
 * - claimed by another delivery now: retry when its claim ends, to see how it went; a deleted
 *   event whose receipt's created event is being pushed: retry a few seconds later;
 * - a created event whose receipt was deleted before it went out: not pushed at all, ack;
 * - no push URL: one log line, marked delivered, ack;
 * - pushed with a 2xx: marked delivered, ack;
 * - 408, 429, 5xx, network failure, unusable settings: retry with growing delay; Queues moves the
 *   message to the dead-letter queue once max_retries is used up;
 * - any other answer: sent to the dead-letter queue at once, ack.
 */
export async function deliverNotice(
  message: Message<ReceiptNotice>,
  env: NotifierEnv,
  target: PushTarget,
  now = new Date(),
): Promise<void> {
  const { event_id, receipt_id } = message.body;
  const fields = { event_id, receipt_id, attempt: message.attempts };
  try {
    const { db } = shardOfEvent(env, event_id);
    const claim = await claimNotice(db, event_id, now, CLAIM_MS);
    if (claim.status === "delivered" || claim.status === "gone") {
      logLine("info", "notice-delivery", { ...fields, outcome: `duplicate acked (${claim.status})` });
      message.ack();
      return;
    }
    if (claim.status === "held") {
      const delaySeconds = Math.max(1, Math.ceil((claim.until.getTime() - now.getTime()) / 1000));
      logLine("info", "notice-delivery", { ...fields, outcome: "held by another delivery; retried", delay_s: delaySeconds });
      message.retry({ delaySeconds });
      return;
    }

    const notice = JSON.parse(claim.payload) as ReceiptNotice;
    if (notice.type === "receipt.created" && claim.body === null) {
      await markDelivered(db, event_id, new Date());
      logLine("info", "notice-delivery", { ...fields, outcome: "not sent: the receipt was deleted before it went out" });
      message.ack();
      return;
    }
    if (target.kind === "log") {
      // The receipt's body stays out of the log: receipt content never goes there.
      logLine("info", "notice", { ...notice, delivery: "logged (no APP_PUSH_URL)" });
      await markDelivered(db, event_id, new Date());
      message.ack();
      return;
    }
    const result =
      target.kind === "push"
        ? await pushNotice(target, event_id, pushBody(claim.payload, notice.type === "receipt.created" ? claim.body : null), now)
        : { ok: false as const, retryable: true, error: `notifier misconfigured: ${target.problem}` };
    if (result.ok) {
      await markDelivered(db, event_id, new Date());
      logLine("info", "notice-delivery", { ...fields, outcome: "delivered", status: result.status });
      message.ack();
      return;
    }

    await recordFailure(db, event_id, result.error);
    if (result.retryable) {
      const delaySeconds = retryDelaySeconds(message.attempts, result.retryAfterSeconds);
      logLine("warn", "notice-delivery", { ...fields, outcome: "failed; retried", cause: result.error, delay_s: delaySeconds });
      message.retry({ delaySeconds });
      return;
    }
    await env.FAILED_NOTICES.send(message.body, { contentType: "json" });
    logLine("error", "notice-delivery", { ...fields, outcome: "refused; dead-lettered", cause: result.error });
    message.ack();
  } catch (error) {
    // D1 or the dead-letter queue failed: the notice is still in the outbox, so try again.
    const delaySeconds = retryDelaySeconds(message.attempts);
    logLine("error", "notice-delivery", { ...fields, outcome: "error; retried", cause: describeError(error), delay_s: delaySeconds });
    message.retry({ delaySeconds });
  }
}

// A created event's push carries the receipt's body as stored, spliced in as text so that the
// app gets exactly the bytes add stored; the outbox keeps the event without it.
function pushBody(payload: string, receiptBody: string | null): string {
  return receiptBody === null ? payload : `${payload.slice(0, -1)},"receipt":${receiptBody}}`;
}
