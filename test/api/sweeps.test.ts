/**
 * The cron's sweeps within D1's limit of queries per Worker invocation (docs/scale.md §6): the
 * tick hands the shards out over the SWEEPS queue and issues no D1 query itself, and every
 * consumer invocation stays within SWEEP_QUERY_BUDGET however many shards there are.
 */
import { createExecutionContext, createMessageBatch, createScheduledController, waitOnExecutionContext } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it } from "vitest";
import { newDeletionNotice } from "../../src/api/events.ts";
import {
  SHARDS_PER_SWEEP,
  SHARD_SWEEP_QUERIES,
  SWEEP_QUERY_BUDGET,
  consumeSweeps,
  dispatchSweeps,
  runScheduledJobs,
} from "../../src/api/scheduled.ts";
import worker from "../../src/api/index.ts";
import type { ApiEnv } from "../../src/shared/env.ts";
import { shardBinding } from "../../src/shared/shard-ids.ts";
import { noticesOf, type NoticeMessage, type SweepMessage } from "../../src/shared/types.ts";
import { claimEvents, markEndpointDown, markEndpointUp, settleEvents } from "../../src/storage/outbox/operations.ts";
import { deleteOwnedReceipt } from "../../src/storage/receipts.ts";
import { IDEMPOTENCY_WINDOW_MS } from "../../src/storage/receipts.ts";
import { routeStorageCalls } from "../support/binding-proxy.ts";
import { consoleLines, loggedRequests, uniqueId } from "../support/api.ts";
import { forgetPushEndpoint, seedReceipt } from "../support/notices.ts";
import { SHARDS, idOn, rowsOnEveryShard } from "../support/shards.ts";
import { testUserKey } from "../support/user-keys.ts";

const JOB_NAMES = [
  "app-user-jobs.purge-expired",
  "archive-tombstones.purge-lines",
  "archive-tombstones.purge-old",
  "audit.purge-expired",
  "erasure-fences.purge",
  "idempotency-keys.delete-expired",
  "notices.purge-delivered",
  "notices.resend",
];

/**
 * The test run's bindings plus `count` more shards than its three: more names bound to its three
 * databases, so that the sweeps meet more shards than one invocation may visit.
 */
function withManyShards(count: number): { env: ApiEnv; names: string[] } {
  const names = Array.from({ length: count }, (_, index) => `many${String(index).padStart(3, "0")}`);
  const aliases = Object.fromEntries(names.map((name, index) => [shardBinding(name), SHARDS[index % SHARDS.length]!.db]));
  return { env: { ...env, ...aliases }, names: [...SHARDS.map(({ name }) => name), ...names] };
}

/** One Worker invocation's view of the bindings: its D1 queries counted per binding, its sweeps kept. */
function invocation(base: ApiEnv) {
  const queriesPerBinding = new Map<string, number>();
  const sent: SweepMessage[] = [];
  const counted = routeStorageCalls(base, (site, invoke) => {
    if (site.kind === "d1") queriesPerBinding.set(site.binding, (queriesPerBinding.get(site.binding) ?? 0) + 1);
    return invoke();
  });
  // The queue's messages are kept for the test to deliver, each batch to an invocation of its own.
  const sweeps = {
    send: async (body: SweepMessage) => void sent.push(body),
    sendBatch: async (messages: Iterable<MessageSendRequest<SweepMessage>>) => void sent.push(...[...messages].map(({ body }) => body)),
  } as unknown as Queue<SweepMessage>;
  return {
    env: { ...counted, SWEEPS: sweeps },
    sent,
    queriesPerBinding,
    queries: () => [...queriesPerBinding.values()].reduce((sum, count) => sum + count, 0),
  };
}

function batchOf(bodies: readonly SweepMessage[]): readonly Message<SweepMessage>[] {
  return createMessageBatch<SweepMessage>(
    "receipts-v2-sweeps",
    bodies.map((body, index) => ({ id: `sweep-${index}`, timestamp: new Date(), attempts: 1, body })),
  ).messages;
}

/** Expired idempotency keys on every database: more than one delete round, so the sweeps have work. */
async function seedExpiredKeys(now: number, count: number): Promise<string> {
  const clientId = uniqueId("sweeps");
  await Promise.all(
    SHARDS.map((shard) =>
      shard.db
        .prepare(
          `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?3)
           INSERT INTO idempotency_keys (client_id, idempotency_key, fingerprint, receipt_id, response, created_at)
           SELECT ?1, 'expired-' || i, 'f', 'r-' || i, '{}', ?2 FROM n`,
        )
        .bind(clientId, new Date(now - IDEMPOTENCY_WINDOW_MS - 1).toISOString(), count)
        .run(),
    ),
  );
  return clientId;
}

async function keysOf(clientId: string): Promise<number> {
  const rows = await rowsOnEveryShard<{ n: number }>("SELECT COUNT(*) AS n FROM idempotency_keys WHERE client_id = ?", clientId);
  return rows.reduce((sum, { n }) => sum + n, 0);
}

describe("docs/scale.md §6 the cron's sweeps stay within a budget of D1 queries per invocation", () => {
  it("the budget leaves room under D1's 1,000 and covers at least one shard at its worst", () => {
    expect(SWEEP_QUERY_BUDGET).toBeLessThan(1000);
    expect(SHARDS_PER_SWEEP).toBeGreaterThanOrEqual(1);
    expect(SHARDS_PER_SWEEP * SHARD_SWEEP_QUERIES).toBeLessThanOrEqual(SWEEP_QUERY_BUDGET);
  });

  it("more shards than one invocation may sweep: the tick queries nothing, every shard is swept once, no invocation over budget", async () => {
    const now = Date.now();
    const clientId = await seedExpiredKeys(now, 2500);
    const many = withManyShards(SHARDS_PER_SWEEP * 2);
    expect(many.names.length).toBeGreaterThan(SHARDS_PER_SWEEP);

    const tick = invocation(many.env);
    await dispatchSweeps(tick.env, new Date(now));
    expect(tick.queries()).toBe(0);
    expect(tick.sent).toHaveLength(Math.ceil(many.names.length / SHARDS_PER_SWEEP));
    expect(tick.sent.flatMap(({ shards }) => shards).sort()).toEqual([...many.names].sort());

    const sweptBy = new Map<string, number>();
    const logged: Record<string, unknown>[] = [];
    for (const [index, message] of tick.sent.entries()) {
      expect(message.shards.length).toBeLessThanOrEqual(SHARDS_PER_SWEEP);
      const sweep = invocation(many.env);
      logged.push(...(await loggedRequests(() => consumeSweeps(batchOf([message]), sweep.env))));
      expect(sweep.queries()).toBeLessThanOrEqual(SWEEP_QUERY_BUDGET);
      expect(sweep.queries()).toBeLessThanOrEqual(message.shards.length * SHARD_SWEEP_QUERIES);
      expect(sweep.sent).toEqual([]);
      for (const binding of sweep.queriesPerBinding.keys()) {
        expect(sweptBy.get(binding), `${binding} swept by two invocations`).toBeUndefined();
        sweptBy.set(binding, index);
      }
    }
    expect([...sweptBy.keys()].sort()).toEqual(many.names.map(shardBinding).sort());
    for (const name of many.names) {
      const jobs = logged.filter((line) => line.event === "scheduled" && line.shard === name).map((line) => line.job);
      expect(jobs.sort()).toEqual(JOB_NAMES);
    }
    expect(logged.filter((line) => line.level !== "info")).toEqual([]);
    // The work was done, as of the tick's time.
    expect(await keysOf(clientId)).toBe(0);
  });

  it("a batch of several full messages in one invocation: it sweeps one budget's worth and hands the rest back", async () => {
    const many = withManyShards(SHARDS_PER_SWEEP * 3);
    const at = new Date().toISOString();
    const messages = [0, 1, 2].map((index) => ({
      shards: many.names.slice(index * SHARDS_PER_SWEEP, (index + 1) * SHARDS_PER_SWEEP),
      at,
    }));
    const sweep = invocation(many.env);
    await loggedRequests(() => consumeSweeps(batchOf(messages), sweep.env));
    expect(sweep.queries()).toBeLessThanOrEqual(SWEEP_QUERY_BUDGET);
    expect([...sweep.queriesPerBinding.keys()].sort()).toEqual(messages[0]!.shards.map(shardBinding).sort());
    expect(sweep.sent.flatMap(({ shards }) => shards).sort()).toEqual([...messages[1]!.shards, ...messages[2]!.shards].sort());
    expect(sweep.sent.every((message) => message.at === at && message.shards.length <= SHARDS_PER_SWEEP)).toBe(true);
  });

  it("a shard no longer bound when its message arrives is skipped with a warning", async () => {
    const sweep = invocation(env);
    const lines = await loggedRequests(() =>
      consumeSweeps(batchOf([{ shards: ["gone", SHARDS[0]!.name], at: new Date().toISOString() }]), sweep.env),
    );
    expect(lines).toContainEqual(expect.objectContaining({ level: "warn", event: "scheduled", job: "sweep", shard: "gone" }));
    expect([...sweep.queriesPerBinding.keys()]).toEqual([SHARDS[0]!.binding]);
  });

  it("a tick whose queue send fails logs an error naming the dispatch, and sweeps nothing itself", async () => {
    const tick = invocation(env);
    const failing = { ...tick.env, SWEEPS: { sendBatch: () => Promise.reject(new Error("Queue send failed: service unavailable")) } };
    const ctx = createExecutionContext();
    const lines = await loggedRequests(async () => {
      await worker.scheduled(createScheduledController({ scheduledTime: new Date(), cron: "* * * * *" }), failing as unknown as ApiEnv, ctx);
      await waitOnExecutionContext(ctx);
    });
    expect(lines).toContainEqual(
      expect.objectContaining({ level: "error", event: "scheduled", job: "sweeps.dispatch", cause: "Error: Queue send failed: service unavailable" }),
    );
    expect(tick.queries()).toBe(0);
  });

  it("through the real queue: the tick's messages reach this Worker's consumer, which sweeps every shard", async () => {
    const now = Date.now();
    const clientId = await seedExpiredKeys(now, 3);
    // The consumer runs in this isolate: its log lines are kept out of the test's output.
    await consoleLines(async () => {
      await dispatchSweeps(env, new Date(now));
      const deadline = Date.now() + 10_000;
      while ((await keysOf(clientId)) > 0 && Date.now() < deadline) await scheduler.wait(100);
    });
    expect(await keysOf(clientId)).toBe(0);
  });
});

describe("docs/reliability.md#delivery-for-days the re-send sweep carries the retry schedule and the probes", () => {
  /** Runs every sweep at `now` with the notices queue kept; returns the event_ids handed to it. */
  async function sweepAt(now: number): Promise<string[]> {
    const sent: string[] = [];
    const notices = { sendBatch: async (messages: { body: NoticeMessage }[]) => void sent.push(...messages.flatMap(({ body }) => noticesOf(body).map(({ event_id }) => event_id))) };
    await consoleLines(() => runScheduledJobs({ ...env, NOTICES: notices as unknown as Queue<NoticeMessage> }, new Date(now)));
    return sent;
  }
  const allShards = SHARDS.map(({ db }) => db);

  afterEach(forgetPushEndpoint);

  it("a failed attempt is handed over when due and once; while the push service is down one event a shard; once it is back, everything that waited", async () => {
    const t0 = Date.now();
    const shard = SHARDS[0]!;
    const events = await Promise.all(
      Array.from({ length: 3 }, async () => {
        const client = { clientId: uniqueId("pos"), secret: "", chains: [uniqueId("chain")] };
        const receipt = await seedReceipt(client, { receipt_id: idOn(shard) });
        const notice = newDeletionNotice(receipt, shard, new Date(t0));
        expect(await deleteOwnedReceipt(shard, notice, await testUserKey(notice.app_user_id), "test-request")).toEqual({ deleted: true });
        return notice.event_id;
      }),
    );
    const [failed] = events;
    await claimEvents(shard.db, [failed!], new Date(t0), 30_000);
    const schedule = { nextAttemptAt: new Date(t0 + 40_000), retryUntil: new Date(t0 + 72 * 3_600_000), lateMs: 0 };
    await settleEvents(shard.db, { delivered: [], failed: [{ eventId: failed!, error: "HTTP 503 from the push service", schedule }] }, new Date(t0));

    // Past the grace: the two never claimed go; the failed one waits for its attempt.
    expect((await sweepAt(t0 + 31_000)).filter((id) => events.includes(id)).sort()).toEqual(events.slice(1).sort());
    expect(await sweepAt(t0 + 39_000)).not.toContain(failed);
    expect(await sweepAt(t0 + 41_000)).toContain(failed);
    expect(await sweepAt(t0 + 42_000)).not.toContain(failed);

    // Down (the notifier acked the copies unpushed): one due event per shard a run, whatever waits.
    await markEndpointDown(allShards, new Date(t0 + 43_000), 20_000);
    const offered = await sweepAt(t0 + 3 * 3_600_000 + 1);
    expect(offered.length).toBeLessThanOrEqual(SHARDS.length);
    // Back: every event that waited since before, at the next run.
    await markEndpointUp(allShards, new Date(t0 + 3 * 3_600_000 + 2));
    expect((await sweepAt(t0 + 3 * 3_600_000 + 3)).filter((id) => events.includes(id)).sort()).toEqual([...events].sort());
  });
});
