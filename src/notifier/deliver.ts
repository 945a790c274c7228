/**
 * Delivery of the event each message of the notices queue carries (docs/api.md#receipt-events):
 * at least once, and pushed once per event_id however often the queue hands it over, through a
 * claim on its outbox row; a receipt's created event is never pushed after its deleted event.
 */
import type { NotifierEnv } from "../shared/env.ts";
import { describeError, logLine } from "../shared/log.ts";
import { receiptOf, type QueuedNotice } from "../shared/types.ts";
import { claimEvents, settleEvents, type Claim } from "../storage/outbox/operations.ts";
import { pushedEvent } from "../storage/outbox/pushed-event.ts";
import { shardOfId, shardsOf, type Shard } from "../storage/shards.ts";
import type { DeliveryTiming, PushTarget } from "../shared/config.ts";
import { pushNotice } from "./push.ts";
import { retryDelaySeconds } from "./retry.ts";

/** How many pushes of one batch are in flight at once: a Worker may hold six connections open. */
const PUSH_CONCURRENCY = 6;

/**
 * Delivers the events of a batch of messages and acks or retries each message; never throws, so
 * one event cannot hold up the others. The D1 round trips are fixed per shard the batch touches, whatever its size:
 * one to claim its events together, one to record what became of them.
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
export async function deliverBatch(
  messages: readonly Message<QueuedNotice>[],
  env: NotifierEnv,
  target: PushTarget,
  timing: DeliveryTiming,
  now = new Date(),
): Promise<void> {
  const byShard = new Map<Shard, Message<QueuedNotice>[]>();
  for (const message of messages) {
    const shard = shardOfId(shardsOf(env), message.body.event_id);
    if (!shard) {
      retryAfterError(message, timing, new Error("event_id names no shard of this Worker"));
      continue;
    }
    const group = byShard.get(shard);
    if (group) group.push(message);
    else byShard.set(shard, [message]);
  }
  await Promise.all([...byShard].map(([shard, group]) => deliverOnShard(shard, group, env, target, timing, now)));
}

/** What one claimed event came to, before it is recorded and its message acked or retried. */
type Settled =
  | { message: Message<QueuedNotice>; done: true; outcome: string; status?: number }
  | { message: Message<QueuedNotice>; done: false; error: string; retryable: boolean; retryAfterSeconds?: number };

async function deliverOnShard(
  shard: Shard,
  messages: readonly Message<QueuedNotice>[],
  env: NotifierEnv,
  target: PushTarget,
  timing: DeliveryTiming,
  now: Date,
): Promise<void> {
  let claims: Claim[];
  try {
    claims = await claimEvents(shard.db, messages.map((message) => message.body.event_id), now, timing.claimMs);
  } catch (error) {
    for (const message of messages) retryAfterError(message, timing, error);
    return;
  }

  const settled: Settled[] = [];
  const pushes: (() => Promise<Settled>)[] = [];
  messages.forEach((message, i) => {
    const claim = claims[i]!;
    if (claim.status === "delivered" || claim.status === "gone") {
      logLine("info", "notice-delivery", { ...fieldsOf(message), outcome: `duplicate acked (${claim.status})` });
      message.ack();
    } else if (claim.status === "held") {
      const delaySeconds = Math.max(1, Math.ceil((claim.until.getTime() - now.getTime()) / 1000));
      logLine("info", "notice-delivery", { ...fieldsOf(message), outcome: "held by another delivery; retried", delay_s: delaySeconds });
      message.retry({ delaySeconds });
    } else {
      const event = JSON.parse(claim.payload) as QueuedNotice;
      if (event.type === "receipt.created" && claim.body === null) {
        settled.push({ message, done: true, outcome: "not sent: the receipt was deleted before it went out" });
      } else if (target.kind === "log") {
        // The receipt's body stays out of the log: receipt content never goes there.
        logLine("info", "notice", { ...event, delivery: "logged (no APP_PUSH_URL)" });
        settled.push({ message, done: true, outcome: "logged" });
      } else if (target.kind === "misconfigured") {
        settled.push({ message, done: false, retryable: true, error: `notifier misconfigured: ${target.problem}` });
      } else {
        const body = pushedEvent(claim.payload, event.type === "receipt.created" ? claim.body : null);
        pushes.push(async () => {
          const result = await pushNotice(target, event.event_id, body, now, timing.pushTimeoutMs);
          return result.ok ? { message, done: true, outcome: "delivered", status: result.status } : { message, done: false, ...result };
        });
      }
    }
  });
  settled.push(...(await inBoundedParallel(pushes, PUSH_CONCURRENCY)));
  if (settled.length === 0) return;

  try {
    await settleEvents(
      shard.db,
      {
        delivered: settled.flatMap((item) => (item.done ? [item.message.body.event_id] : [])),
        failed: settled.flatMap((item) => (item.done ? [] : [{ eventId: item.message.body.event_id, error: item.error }])),
      },
      new Date(),
    );
  } catch (error) {
    // Not recorded: every claim runs out by itself, and the retried copies try again.
    for (const { message } of settled) retryAfterError(message, timing, error);
    return;
  }
  await Promise.all(settled.map((item) => finish(item, env, timing)));
}

async function finish(item: Settled, env: NotifierEnv, timing: DeliveryTiming): Promise<void> {
  const { message } = item;
  const fields = fieldsOf(message);
  if (item.done) {
    logLine("info", "notice-delivery", { ...fields, outcome: item.outcome, status: item.status });
    message.ack();
  } else if (item.retryable) {
    const delaySeconds = retryDelaySeconds(message.attempts, timing.retry, item.retryAfterSeconds);
    logLine("warn", "notice-delivery", { ...fields, outcome: "failed; retried", cause: item.error, delay_s: delaySeconds });
    message.retry({ delaySeconds });
  } else {
    try {
      await env.FAILED_NOTICES.send(message.body, { contentType: "json" });
    } catch (error) {
      retryAfterError(message, timing, error);
      return;
    }
    logLine("error", "notice-delivery", { ...fields, outcome: "refused; dead-lettered", cause: item.error });
    message.ack();
  }
}

// D1 or the dead-letter queue failed: the event is still in the outbox, so try again.
function retryAfterError(message: Message<QueuedNotice>, timing: DeliveryTiming, error: unknown): void {
  const delaySeconds = retryDelaySeconds(message.attempts, timing.retry);
  logLine("error", "notice-delivery", { ...fieldsOf(message), outcome: "error; retried", cause: describeError(error), delay_s: delaySeconds });
  message.retry({ delaySeconds });
}

function fieldsOf(message: Message<QueuedNotice>) {
  return { event_id: message.body.event_id, receipt_id: receiptOf(message.body), attempt: message.attempts };
}

// Runs the tasks with at most `limit` in flight, and returns their results in task order.
async function inBoundedParallel<T>(tasks: readonly (() => Promise<T>)[], limit: number): Promise<T[]> {
  const results: T[] = [];
  let next = 0;
  const worker = async () => {
    while (next < tasks.length) {
      const index = next;
      next += 1;
      results[index] = await tasks[index]!();
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, tasks.length) }, worker));
  return results;
}
