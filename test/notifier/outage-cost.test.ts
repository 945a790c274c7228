/**
 * What a one-hour push outage costs with 10,000 events waiting, and how soon they arrive after
 * it (docs/reliability.md#what-an-outage-costs). The notifier's batches and the cron's re-sends
 * run as deployed, against the test run's local D1, on a clock of their own: an hour passes in
 * seconds, by the `now` each call takes, instead of timers shortened by configuration. The queue
 * is played here (batches of 100 as deployed, a message retried with its delay), so that its
 * operations can be counted; the push service answers 503 for the hour, then 204.
 *
 * Before the schedule moved into the outbox, the queue's retries carried it: each event was
 * pushed 11 times over about 50 minutes (10 s doubling to 600 s, max_retries = 10), then
 * dead-lettered. That column is computed from those deployed values, per event.
 */
import { env } from "cloudflare:workers";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { EVENTS_PER_MESSAGE, resendPendingNotices } from "../../src/api/scheduled.ts";
import { apiConfig, deliveryTiming, pushTarget } from "../../src/shared/config.ts";
import type { NotifierEnv } from "../../src/shared/env.ts";
import { noticesOf, type DeletionNotice, type NoticeMessage } from "../../src/shared/types.ts";
import { deliverBatch } from "../../src/notifier/deliver.ts";
import { freshEndpointView } from "../../src/notifier/endpoint.ts";
import { formatTable } from "../../harness/table.ts";
import { TEST_PUSH_SECRET } from "../support/keys.ts";
import { routeStorageCalls } from "../support/binding-proxy.ts";
import { DEPLOYED_PUSH_SETTINGS, forgetPushEndpoint } from "../support/notices.ts";
import { SHARDS, idOn } from "../support/shards.ts";

const EVENTS = 10_000;
const OUTAGE_MS = 3_600_000;
const CRON_PERIOD_MS = 60_000;
const BATCH_SIZE = 100;
const STEP_MS = 1_000;

/** What the hour cost, counted where it happens. */
interface Costs {
  pushes: number;
  /** Messages sent to a queue (the cron's re-sends, dead letters), retried, and handed to the notifier. */
  queueOperations: number;
  /** Rows D1 reports written (its billing unit), by the notifier and the cron. */
  d1RowsWritten: number;
}

/** A queue message as the played queue holds it. */
interface Queued {
  body: NoticeMessage;
  attempts: number;
  at: number;
}

let pushesSucceed = false;

beforeEach(() => {
  vi.stubGlobal(
    "fetch",
    vi.fn(async () => {
      costs.pushes += 1;
      return new Response(null, { status: pushesSucceed ? 204 : 503 });
    }),
  );
});

afterEach(async () => {
  vi.unstubAllGlobals();
  await forgetPushEndpoint();
});

const costs: Costs = { pushes: 0, queueOperations: 0, d1RowsWritten: 0 };

// Every D1 call of the notifier and the cron, its rows written added up.
function counted<Env extends object>(base: Env): Env {
  return routeStorageCalls(base, async (site, invoke) => {
    const result = await invoke();
    if (site.kind === "d1") {
      for (const each of Array.isArray(result) ? result : [result]) {
        const written = (each as { meta?: { rows_written?: number } } | null)?.meta?.rows_written;
        if (typeof written === "number") costs.d1RowsWritten += written;
      }
    }
    return result;
  });
}

/** Records `count` deleted events in the outbox, spread over `shards`, as delete does. */
async function recordWaitingEvents(count: number, at: Date, shards = SHARDS): Promise<DeletionNotice[]> {
  const notices = Array.from({ length: count }, (_, i): DeletionNotice => {
    const shard = shards[i % shards.length]!;
    return {
      event_id: idOn(shard),
      type: "receipt.deleted",
      occurred_at: at.toISOString(),
      receipt_id: idOn(shard),
      chain_id: "chain-outage",
      client_id: "pos-outage",
      app_user_id: "au-outage",
    };
  });
  for (const shard of shards) {
    const mine = notices.filter((_, i) => shards[i % shards.length] === shard);
    for (let start = 0; start < mine.length; start += 500) {
      await shard.db
        .prepare(
          `INSERT INTO notice_outbox (event_id, receipt_id, payload, created_at)
          SELECT json_extract(value, '$.event_id'), json_extract(value, '$.receipt_id'), value, ?2 FROM json_each(?1)`,
        )
        .bind(JSON.stringify(mine.slice(start, start + 500)), at.toISOString())
        .run();
    }
  }
  return notices;
}

describe("docs/reliability.md what a one-hour push outage costs, 10,000 events waiting", () => {
  it("pushes, queue operations and D1 writes, before (the queue's retries) and now; every event arrives within minutes after", async () => {
    const t0 = Date.now();
    const notices = await recordWaitingEvents(EVENTS, new Date(t0));
    const ours = new Set(notices.map((notice) => notice.event_id));
    const notifierEnv = counted({
      ...Object.fromEntries(SHARDS.map((shard) => [shard.binding, shard.db])),
      FAILED_NOTICES: { send: async () => void (costs.queueOperations += 1) },
      APP_PUSH_URL: "https://push.example.test/receipts",
      APP_PUSH_SECRET: TEST_PUSH_SECRET,
      ...DEPLOYED_PUSH_SETTINGS,
    } as unknown as NotifierEnv);
    const target = await pushTarget(notifierEnv);
    const timing = deliveryTiming(notifierEnv);
    const endpoint = freshEndpointView();
    await forgetPushEndpoint();

    // The API's sends after each delete: every event's first copy, at the outage's start.
    let queue: Queued[] = notices.map((body) => ({ body, attempts: 1, at: t0 }));
    const cronQueue = {
      sendBatch: async (messages: { body: NoticeMessage }[]) => {
        costs.queueOperations += messages.length;
        queue.push(...messages.map(({ body }) => ({ body, attempts: 1, at: now })));
      },
    } as unknown as Queue<NoticeMessage>;
    const config = apiConfig(env);
    const delivered = new Set<string>();
    let now = t0;
    let nextCron = t0 + CRON_PERIOD_MS;

    const step = async () => {
      if (now >= nextCron) {
        nextCron += CRON_PERIOD_MS;
        for (const shard of SHARDS) await resendPendingNotices({ NOTICES: cronQueue }, counted(shard) as typeof shard, new Date(now), config);
      }
      const due = queue.filter((message) => message.at <= now);
      queue = queue.filter((message) => message.at > now);
      for (let start = 0; start < due.length; start += BATCH_SIZE) {
        const batch = due.slice(start, start + BATCH_SIZE).map((queued) => playedMessage(queued, now, (retried) => queue.push(retried), delivered));
        costs.queueOperations += batch.length;
        await deliverBatch(batch, notifierEnv, target, timing, endpoint, new Date(now));
      }
      now += STEP_MS;
    };

    while (now < t0 + OUTAGE_MS) await step();
    const during = { ...costs };
    pushesSucceed = true;
    const back = now;
    while (![...ours].every((id) => delivered.has(id)) && now < back + 30 * 60_000) await step();
    const recoveryMinutes = (now - back) / 60_000;

    // Before: per event, 11 pushes; 10 queue retries and 11 deliveries, a dead-letter send and its
    // delivery; a claim and a record per push (a row each), and the move to failed_notices (two).
    const before: Costs = { pushes: EVENTS * 11, queueOperations: EVENTS * (10 + 11 + 2), d1RowsWritten: EVENTS * (11 * 2 + 2) };
    console.info(
      `\nA one-hour push outage, ${EVENTS} events waiting (deployed timings, the clock played):\n` +
        formatTable(
          ["during the hour", "before: queue retries", "now: outbox schedule, probes"],
          [
            ["pushes attempted", String(before.pushes), String(during.pushes)],
            ["queue operations", String(before.queueOperations), String(during.queueOperations)],
            ["D1 rows written", String(before.d1RowsWritten), String(during.d1RowsWritten)],
            ["dead-lettered, needing an operator", String(EVENTS), "0"],
            ["after it: every event delivered within", "operator's replay", `${recoveryMinutes.toFixed(1)} min`],
          ],
        ),
    );
    expect(delivered.size).toBeGreaterThanOrEqual(EVENTS);
    expect(recoveryMinutes).toBeLessThanOrEqual(10);
    // A few pushes a minute, not one per waiting event's attempt.
    expect(during.pushes).toBeLessThan(EVENTS / 10);
    expect(during.queueOperations).toBeLessThan(before.queueOperations / 10);
    expect(during.d1RowsWritten).toBeLessThan(before.d1RowsWritten / 10);
  }, 600_000);
});

describe("docs/reliability.md#delivery-for-days the drain after a long outage", () => {
  it("docs/api.md#event-feed one cron run hands a shard's backlog of 45,000 events over at once, ten to a message, within D1's queries and the queue's limits", async () => {
    const shard = SHARDS[0]!;
    await forgetPushEndpoint();
    const waiting = new Set((await recordWaitingEvents(45_000, new Date(Date.now() - 3_600_000), [shard])).map(({ event_id }) => event_id));
    const calls: { messages: number; bytes: number; largest: number; events: string[] }[] = [];
    const queue = {
      sendBatch: async (messages: { body: NoticeMessage }[]) => {
        const sizes = messages.map(({ body }) => new TextEncoder().encode(JSON.stringify(body)).byteLength);
        calls.push({
          messages: messages.length,
          bytes: sizes.reduce((sum, size) => sum + size, 0),
          largest: Math.max(...messages.map(({ body }) => noticesOf(body).length)),
          events: messages.flatMap(({ body }) => noticesOf(body).map(({ event_id }) => event_id)),
        });
      },
    } as unknown as Queue<NoticeMessage>;
    let queries = 0;
    const db = routeStorageCalls({ db: shard.db }, (site, invoke) => {
      if (site.kind === "d1") queries += 1;
      return invoke();
    }).db;
    await resendPendingNotices({ NOTICES: queue }, { ...shard, db }, new Date(), apiConfig(env));

    const handed = new Set(calls.flatMap(({ events }) => events));
    expect([...waiting].filter((id) => !handed.has(id))).toEqual([]);
    // The job's declared most: the state, then a read and a mark per page.
    expect(queries).toBeLessThanOrEqual(21);
    for (const call of calls) {
      expect(call.messages).toBeLessThanOrEqual(100);
      expect(call.bytes).toBeLessThanOrEqual(256_000);
      expect(call.largest).toBeLessThanOrEqual(EVENTS_PER_MESSAGE);
    }
    // Ten events to a message but a page's last one.
    expect(calls.reduce((sum, call) => sum + call.messages, 0)).toBeLessThanOrEqual(handed.size / EVENTS_PER_MESSAGE + 10);
  }, 300_000);
});

// A message of the played queue: ack ends it, retry hands it back after its delay; a delivered
// event is one acked after its push went through (the notifier acks a parked one too, unpushed).
function playedMessage(
  queued: Queued,
  now: number,
  requeue: (message: Queued) => void,
  delivered: Set<string>,
): Message<NoticeMessage> {
  return {
    id: crypto.randomUUID(),
    timestamp: new Date(now),
    body: queued.body,
    attempts: queued.attempts,
    ack: () => {
      if (pushesSucceed) for (const { event_id } of noticesOf(queued.body)) delivered.add(event_id);
    },
    retry: (options?: QueueRetryOptions) => {
      costs.queueOperations += 1;
      requeue({ ...queued, attempts: queued.attempts + 1, at: now + (options?.delaySeconds ?? 0) * 1000 });
    },
  } as Message<NoticeMessage>;
}
