/**
 * Delivery of the event each message of the notices queue carries (docs/api.md#receipt-events):
 * at least once, and pushed once per event_id however often the queue hands it over, through a
 * claim on its outbox row; a receipt's created event is never pushed after its deleted event.
 */
import type { NotifierEnv } from "../shared/env.ts";
import { describeError, logLine } from "../shared/log.ts";
import { receiptOf, type NoticeMessage, type QueuedNotice } from "../shared/types.ts";
import { eventMessages } from "./bundles.ts";
import { claimEvents, settleEvents, type Claim } from "../storage/outbox/operations.ts";
import { pushedEvent } from "../storage/outbox/pushed-event.ts";
import { shardOfId, shardsOf, type Shard } from "../storage/shards.ts";
import { timeOfId } from "../shared/shard-ids.ts";
import type { DeliveryTiming, PushTarget } from "../shared/config.ts";
import { writeMetric } from "../shared/metrics.ts";
import { throughEndpoint, type BatchRun, type EndpointView, type PushOutcome } from "./endpoint.ts";
import { pushNotice, type PushResult } from "./push.ts";
import { nextAttempt, retryDelaySeconds, type NextAttempt } from "./retry.ts";

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
 * - 408, 429, 5xx, network failure, unusable settings: its next attempt recorded in the outbox
 *   (src/notifier/retry.ts), for the cron to hand over when due, ack; once its retry window is
 *   over, sent to the dead-letter queue instead;
 * - any other answer: sent to the dead-letter queue at once, ack.
 *
 * While the push service is down (src/notifier/endpoint.ts, docs/reliability.md#backing-off-as-a-whole), a batch asks the
 * home shard for the next probe slot, one round trip: with it, it pushes one event, and on
 * success delivers the rest; without it, it acks every message unpushed and writes nothing, and
 * the cron hands the events over again once a probe got through. An isolate that sees the push
 * service up asks the home shard too, once per probe period, so it learns of an outage that
 * another isolate found.
 *
 * A message that carries several events (the cron's bundle, src/notifier/bundles.ts) is dealt
 * with as a message per event, and acked once each of them was.
 */
export async function deliverBatch(
  batch: readonly Message<NoticeMessage>[],
  env: NotifierEnv,
  target: PushTarget,
  timing: DeliveryTiming,
  endpoint: EndpointView,
  now = new Date(),
): Promise<void> {
  // A bundle's events go as messages of their own; its message is settled as they went.
  const { events: messages, settle } = eventMessages(batch);
  const run: BatchRun = { env, target, timing, now };
  try {
    await throughEndpoint(messages, endpoint, run, {
      deliver: (some) => deliverMessages(some, run),
      retryLater: (message, error) => retryAfterError(message, run.timing, error),
    });
  } finally {
    settle();
  }
}

// Delivers every message, grouped by shard; returns how each push went.
async function deliverMessages(messages: readonly Message<QueuedNotice>[], run: BatchRun): Promise<PushOutcome[]> {
  const { env, timing, now } = run;
  const byShard = new Map<Shard, Message<QueuedNotice>[]>();
  for (const message of messages) {
    if (heldErasureNotice(message, timing, now)) continue;
    const shard = shardOfId(shardsOf(env), message.body.event_id);
    if (!shard) {
      retryAfterError(message, timing, new Error("event_id names no shard of this Worker"));
      continue;
    }
    const group = byShard.get(shard);
    if (group) group.push(message);
    else byShard.set(shard, [message]);
  }
  const outcomes = await Promise.all([...byShard].map(([shard, group]) => deliverOnShard(shard, group, run)));
  return outcomes.flat();
}

/**
 * What one claimed event came to, before it is recorded and its message acked. A failure that
 * retrying cannot help (a refusal) is not `retryable`: its dead letter's log line says which it was.
 */
type Settled =
  | { message: Message<QueuedNotice>; done: true; outcome: string; status?: number }
  | { message: Message<QueuedNotice>; done: false; error: string; retryable: boolean; next: NextAttempt };

async function deliverOnShard(shard: Shard, messages: readonly Message<QueuedNotice>[], run: BatchRun): Promise<PushOutcome[]> {
  const { env, target, timing, now } = run;
  let claims: Claim[];
  try {
    claims = await claimEvents(shard.db, messages.map((message) => message.body.event_id), now, timing.claimMs);
  } catch (error) {
    for (const message of messages) retryAfterError(message, timing, error);
    return [];
  }

  const settled: Settled[] = [];
  const pushes: (() => Promise<(Settled & { push: PushOutcome }) | undefined>)[] = [];
  // No push begins once its claim ran out: the event may be another delivery's by then, or an
  // erasure's, whose app_user.erased event waits for exactly that (see heldErasureNotice).
  const claimEnds = now.getTime() + timing.claimMs;
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
      const failed = (error: string, retryable: boolean, retryAfterSeconds?: number): Settled => ({
        message,
        done: false,
        error,
        retryable,
        next: retryable ? nextAttempt({ ...claim, retryAfterSeconds }, timing.retry, now) : { deadLetter: true },
      });
      if (event.type === "receipt.created" && claim.body === null) {
        settled.push({ message, done: true, outcome: "not sent: the receipt was deleted before it went out" });
      } else if (target.kind === "log") {
        // The receipt's body stays out of the log: receipt content never goes there.
        logLine("info", "notice", { ...event, delivery: "logged (no APP_PUSH_URL)" });
        settled.push({ message, done: true, outcome: "logged" });
      } else if (target.kind === "misconfigured") {
        settled.push(failed(`notifier misconfigured: ${target.problem}`, true));
      } else {
        const body = pushedEvent(claim.payload, event.type === "receipt.created" ? claim.body : null);
        pushes.push(async () => {
          const started = Date.now();
          if (started >= claimEnds) {
            logLine("info", "notice-delivery", { ...fieldsOf(message), outcome: "claim ran out before its push; retried" });
            message.retry({ delaySeconds: 1 });
            return undefined;
          }
          const result = await pushNotice(target, event.event_id, body, now, timing.pushTimeoutMs);
          recordPush(env, shard, event, result, body.length, started);
          return result.ok
            ? { message, done: true, outcome: "delivered", status: result.status, push: { ok: true, retryable: false } }
            : { ...failed(result.error, result.retryable, result.retryAfterSeconds), push: { ok: false, retryable: result.retryable } };
        });
      }
    }
  });
  const pushed = (await inBoundedParallel(pushes, PUSH_CONCURRENCY)).filter((item) => item !== undefined);
  settled.push(...pushed);
  if (settled.length === 0) return [];
  // The shard's copy says down, yet a push got through: it missed the "up" of the probe.
  const copyDown = claims.some((claim) => claim.status === "claimed" && claim.endpointDown);
  const upAt = copyDown && pushed.some(({ push }) => push.ok) ? now : undefined;

  try {
    await settleEvents(
      shard.db,
      {
        delivered: settled.flatMap((item) => (item.done ? [item.message.body.event_id] : [])),
        erasures: settled.flatMap((item) => (item.done && item.message.body.type === "app_user.erased" ? [item.message.body.event_id] : [])),
        failed: settled.flatMap((item) =>
          item.done ? [] : [{ eventId: item.message.body.event_id, error: item.error, schedule: item.next.deadLetter ? null : item.next }],
        ),
        upAt,
      },
      new Date(),
    );
  } catch (error) {
    // Not recorded: every claim runs out by itself, and the retried copies try again.
    for (const { message } of settled) retryAfterError(message, timing, error);
    return pushed.map(({ push }) => push);
  }
  await Promise.all(settled.map((item) => finish(item, env, timing)));
  return pushed.map(({ push }) => push);
}

async function finish(item: Settled, env: NotifierEnv, timing: DeliveryTiming): Promise<void> {
  const { message } = item;
  const fields = fieldsOf(message);
  if (item.done) {
    logLine("info", "notice-delivery", { ...fields, outcome: item.outcome, status: item.status });
    message.ack();
  } else if (!item.next.deadLetter) {
    logLine("warn", "notice-delivery", { ...fields, outcome: "failed; next attempt scheduled", cause: item.error, next_attempt_at: item.next.nextAttemptAt.toISOString() });
    message.ack();
  } else {
    try {
      await env.FAILED_NOTICES.send(message.body, { contentType: "json" });
    } catch (error) {
      retryAfterError(message, timing, error);
      return;
    }
    // An operator reading a refusal looks for the push service's 4xx; one whose window ended, for
    // the failures that went before it.
    const outcome = item.retryable ? "retry window ended; dead-lettered" : "refused; dead-lettered";
    logLine("error", "notice-delivery", { ...fields, outcome, cause: item.error });
    message.ack();
  }
}

// The push's data point (src/shared/metrics.ts): who and what it was about, never whom.
function recordPush(env: NotifierEnv, shard: Shard, event: QueuedNotice, result: PushResult, bytes: number, started: number): void {
  const ended = Date.now();
  const receiptEvent = "client_id" in event ? event : undefined;
  writeMetric(env.METRICS, {
    kind: "push",
    route: event.type,
    outcome: result.ok ? "delivered" : result.retryable ? "retry" : "refused",
    clientId: receiptEvent?.client_id,
    chainId: receiptEvent?.chain_id,
    shard: shard.name,
    status: result.status ?? 0,
    durationMs: ended - started,
    bytes,
    delayMs: ended - Date.parse(event.occurred_at),
  });
}

// D1 or the dead-letter queue failed: the event is still in the outbox, so try again.
function retryAfterError(message: Message<QueuedNotice>, timing: DeliveryTiming, error: unknown): void {
  const delaySeconds = retryDelaySeconds(message.attempts, timing.retry, Math.random());
  logLine("error", "notice-delivery", { ...fieldsOf(message), outcome: "error; retried", cause: describeError(error), delay_s: delaySeconds });
  message.retry({ delaySeconds });
}

/**
 * An `app_user.erased` event waits until every push claimed before it was made has begun or given
 * up: a claim lasts `claimMs`, and the erasure removed its receipts' events before it made this
 * one's event_id, so no event of those receipts reaches the app after it (docs/api.md#erasure).
 * Retried until then; true when held.
 */
function heldErasureNotice(message: Message<QueuedNotice>, timing: DeliveryTiming, now: Date): boolean {
  if (message.body.type !== "app_user.erased") return false;
  const waitMs = timeOfId(message.body.event_id) + timing.claimMs - now.getTime();
  if (!(waitMs > 0)) return false;
  const delaySeconds = Math.ceil(waitMs / 1000);
  logLine("info", "notice-delivery", { ...fieldsOf(message), outcome: "held until pushes claimed before the erasure are over", delay_s: delaySeconds });
  message.retry({ delaySeconds });
  return true;
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
