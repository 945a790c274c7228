/**
 * The notifier's queue handler driven message by message (createMessageBatch/getQueueResult),
 * with the push service stubbed as globalThis.fetch. The notices are recorded in the outbox as
 * delete does, but never sent to the real queue, so the notifier running beside the API does not
 * take part here (test/notifier/flow.test.ts is where it does).
 */
import { createExecutionContext, createMessageBatch, getQueueResult } from "cloudflare:test";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { newCreationNotice, newDeletionNotice } from "../../src/api/events.ts";
import { env } from "cloudflare:workers";
import { apiConfig, deliveryTiming } from "../../src/shared/config.ts";
import { resendPendingNotices } from "../../src/api/scheduled.ts";
import type { NotifierEnv } from "../../src/shared/env.ts";
import { noticesOf, type CreationNotice, type DeletionNotice, type NoticeMessage, type QueuedNotice } from "../../src/shared/types.ts";
import type { AppUserErasedEvent } from "../../src/shared/schemas.ts";
import { stampShardTag } from "../../src/shared/shard-ids.ts";
import { v7 as uuidv7 } from "uuid";
import { FAILED_NOTICES_QUEUE } from "../../src/notifier/dead-letters.ts";
import { createNotifier } from "../../src/notifier/index.ts";
import { nextAttempt, retryDelaySeconds } from "../../src/notifier/retry.ts";
import { replayFailed } from "../../src/storage/outbox/statements.ts";
import { markEndpointDown, markEndpointUp } from "../../src/storage/outbox/operations.ts";
import { deleteOwnedReceipt } from "../../src/storage/receipts.ts";
import { runBatch } from "../../src/storage/statement.ts";
import { consoleLines, uniqueId } from "../support/api.ts";
import { TEST_PUSH_SECRET } from "../support/keys.ts";
import { DEPLOYED_PUSH_SETTINGS, failedRows, forgetPushEndpoint, outboxRows, seedReceipt, verifyStandardWebhook } from "../support/notices.ts";
import { SHARDS, dbOf, idOn } from "../support/shards.ts";
import { shardOfId, shardsOf } from "../../src/storage/shards.ts";
import { StorageLedger } from "../support/storage-ledger.ts";
import { routeStorageCalls } from "../support/binding-proxy.ts";
import { testUserKey } from "../support/user-keys.ts";
import { recordingQueue } from "../support/queues.ts";

const NOTICES_QUEUE = "receipts-v2-notices";
const PUSH_URL = "https://push.example.test/receipts";

/** What the stubbed push service received. */
interface Push {
  url: string;
  headers: Record<string, string>;
  body: string;
}

let pushes: Push[];
/** The stub's answers, in order; the last one repeats. An Error is thrown as a network failure. */
let answers: (number | Error | Response)[];
let deadLetters: DeletionNotice[];
/** What the notifier sent back to the notices queue: the events of a bundle that met its retries. */
let requeued: QueuedNotice[];
/** The notifier under test: a fresh isolate per test, so that no test inherits another's view of the push service. */
let notifier: ReturnType<typeof createNotifier>;

beforeEach(async () => {
  notifier = createNotifier();
  await forgetPushEndpoint();
  pushes = [];
  answers = [200];
  deadLetters = [];
  requeued = [];
  vi.stubGlobal(
    "fetch",
    vi.fn(async (input: RequestInfo | URL, init?: RequestInit) => {
      const request = new Request(input, init);
      pushes.push({ url: request.url, headers: Object.fromEntries(request.headers), body: await request.text() });
      const answer = answers.length > 1 ? answers.shift()! : answers[0]!;
      if (answer instanceof Error) throw answer;
      return answer instanceof Response ? answer : new Response(null, { status: answer });
    }),
  );
});

afterEach(async () => {
  vi.unstubAllGlobals();
  vi.restoreAllMocks();
  await forgetPushEndpoint();
});

type Settings =
  | "APP_PUSH_URL"
  | "APP_PUSH_SECRET"
  | "PUSH_TIMEOUT_SECONDS"
  | "RETRY_FIRST_DELAY_SECONDS"
  | "RETRY_MAX_DELAY_SECONDS"
  | "NOTICE_RETRY_HOURS"
  | "PUSH_PROBE_SECONDS";

function notifierEnv(settings: Partial<Pick<NotifierEnv, Settings>> = {}): NotifierEnv {
  return {
    ...Object.fromEntries(SHARDS.map((shard) => [shard.binding, shard.db])),
    NOTICES: recordingQueue(requeued),
    FAILED_NOTICES: recordingQueue(deadLetters),
    APP_PUSH_URL: PUSH_URL,
    APP_PUSH_SECRET: TEST_PUSH_SECRET,
    ...DEPLOYED_PUSH_SETTINGS,
    ...settings,
  };
}

/** The shard that holds the push service's state: the first by name. */
function homeDb(): D1Database {
  return shardsOf(notifierEnv())[0]!.db;
}

/** A receipt deleted as delete does it: gone, and its notice in the outbox, not enqueued. */
async function recordedNotice(receiptId?: string): Promise<DeletionNotice> {
  const owner = { clientId: uniqueId("pos"), secret: "", chains: [uniqueId("chain")] };
  const receipt = await seedReceipt(owner, receiptId === undefined ? {} : { receipt_id: receiptId });
  const shard = shardOfId(SHARDS, receipt.receipt_id)!;
  const notice = newDeletionNotice(receipt, shard);
  expect(await deleteOwnedReceipt(shard, notice, await testUserKey(notice.app_user_id), "test-request")).toEqual({ deleted: true });
  return notice;
}

/** What the notifier did with a batch: acks, and the delay of each retry, in message order. */
interface Outcome {
  acked: number;
  retried: (number | undefined)[];
}

/** Every shard's cron re-send at `now`, as the sweeps run it; returns the events handed to the queue. */
async function cronResend(now: Date): Promise<QueuedNotice[]> {
  const sent: QueuedNotice[] = [];
  const queue = { sendBatch: async (messages: { body: NoticeMessage }[]) => void sent.push(...messages.flatMap((m) => noticesOf(m.body))) };
  for (const shard of shardsOf(notifierEnv())) {
    await resendPendingNotices({ NOTICES: queue as unknown as Queue<NoticeMessage> }, shard, now, apiConfig(env));
  }
  return sent;
}

/** Hands messages to the notifier as the queue would, and returns what it acked and retried. */
async function deliver(
  queue: string,
  messages: { notice: QueuedNotice; attempts: number }[],
  workerEnv = notifierEnv(),
): Promise<Outcome> {
  const batch = createMessageBatch<QueuedNotice>(
    queue,
    messages.map(({ notice, attempts }, i) => ({ id: `msg-${i}-${crypto.randomUUID()}`, timestamp: new Date(), attempts, body: notice })),
  );
  // getQueueResult reports that a message was retried but not its delaySeconds, so the delay is
  // read off the call itself.
  const delays = new Map<string, number | undefined>();
  for (const message of batch.messages) {
    const retry = message.retry.bind(message);
    vi.spyOn(message, "retry").mockImplementation((options) => {
      delays.set(message.id, options?.delaySeconds);
      retry(options);
    });
  }
  const ctx = createExecutionContext();
  await notifier.queue(batch, workerEnv);
  const result = await getQueueResult(batch, ctx);
  expect(result.ackAll || result.retryBatch.retry).toBe(false);
  return {
    acked: result.explicitAcks.length,
    retried: result.retryMessages.map(({ msgId }) => delays.get(msgId)),
  };
}

describe("docs/api.md#deletion-notices delivery: a signed push per notice", () => {
  it("POSTs the outbox payload, signed the Standard Webhooks way, marks it delivered and acks", async () => {
    const notice = await recordedNotice();
    const result = await deliver(NOTICES_QUEUE, [{ notice, attempts: 1 }]);
    expect(result.acked).toBe(1);
    expect(result.retried).toEqual([]);
    expect(pushes).toHaveLength(1);
    const [push] = pushes;
    const [row] = await outboxRows(notice.receipt_id);
    expect(push!.url).toBe(PUSH_URL);
    expect(push!.body).toBe(row!.payload);
    expect(JSON.parse(push!.body)).toEqual(notice);
    expect(push!.headers).toMatchObject({ "content-type": "application/json", "webhook-id": notice.event_id });
    const timestamp = push!.headers["webhook-timestamp"]!;
    expect(Math.abs(Number(timestamp) - Date.now() / 1000)).toBeLessThan(5);
    expect(push!.headers["webhook-signature"]).toMatch(/^v1,[A-Za-z0-9+/]{43}=$/);
    expect(
      await verifyStandardWebhook({ id: notice.event_id, timestamp, signatureHeader: push!.headers["webhook-signature"]!, body: push!.body }),
    ).toBe(true);
    expect(
      await verifyStandardWebhook(
        { id: notice.event_id, timestamp, signatureHeader: push!.headers["webhook-signature"]!, body: push!.body },
        "whsec_b3RoZXItc2VjcmV0LW9mLXRoaXJ0eS10d28tYnl0ZXMh",
      ),
    ).toBe(false);
    expect(row).toMatchObject({ attempts: 1, claimed_until: null, last_error: null });
    expect(row!.delivered_at).not.toBeNull();
  });

  it("signs with every secret of a rotation, so the app side may verify with either", async () => {
    const notice = await recordedNotice();
    const other = "whsec_b3RoZXItc2VjcmV0LW9mLXRoaXJ0eS10d28tYnl0ZXMh";
    await deliver(NOTICES_QUEUE, [{ notice, attempts: 1 }], notifierEnv({ APP_PUSH_SECRET: `${TEST_PUSH_SECRET} ${other}` }));
    const [push] = pushes;
    const signed = { id: notice.event_id, timestamp: push!.headers["webhook-timestamp"]!, signatureHeader: push!.headers["webhook-signature"]!, body: push!.body };
    expect(signed.signatureHeader.split(" ")).toHaveLength(2);
    expect(await verifyStandardWebhook(signed, TEST_PUSH_SECRET)).toBe(true);
    expect(await verifyStandardWebhook(signed, other)).toBe(true);
  });

  it("pushes each notice of a batch and acks each on its own", async () => {
    const notices = [await recordedNotice(), await recordedNotice(), await recordedNotice()];
    const result = await deliver(NOTICES_QUEUE, notices.map((notice) => ({ notice, attempts: 1 })));
    expect(result.acked).toBe(3);
    expect(pushes.map((push) => push.headers["webhook-id"]).sort()).toEqual(notices.map((n) => n.event_id).sort());
  });

  it("does not follow a redirect: a signed notice goes only to the configured URL", async () => {
    const notice = await recordedNotice();
    answers = [new Response(null, { status: 302, headers: { location: "https://elsewhere.example/" } })];
    const result = await deliver(NOTICES_QUEUE, [{ notice, attempts: 1 }]);
    expect(pushes).toHaveLength(1);
    expect(result.acked).toBe(1);
    expect(deadLetters).toEqual([notice]);
    // Stored, as the dead-letter queue's consumer does within a second: until then its claim
    // holds, and a later test's probe could meet it.
    await deliver(FAILED_NOTICES_QUEUE, [{ notice, attempts: 1 }]);
  });
});

describe("docs/api.md#deletion-notices delivery: duplicates push once", () => {
  it("a second delivery of a delivered event_id is acked without a push", async () => {
    const notice = await recordedNotice();
    await deliver(NOTICES_QUEUE, [{ notice, attempts: 1 }]);
    const again = await deliver(NOTICES_QUEUE, [{ notice, attempts: 1 }]);
    expect(again.acked).toBe(1);
    expect(pushes).toHaveLength(1);
  });

  it("two copies at the same moment, in one batch or two: one push; the other waits out the claim, then acks", async () => {
    const notice = await recordedNotice();
    // A slow push service, so that the copies overlap.
    answers = [new Response(null, { status: 204 })];
    const slow = vi.mocked(fetch).getMockImplementation()!;
    vi.mocked(fetch).mockImplementation(async (...args) => {
      await new Promise((resolve) => setTimeout(resolve, 50));
      return slow(...args);
    });
    const [sameBatch, otherBatch] = await Promise.all([
      deliver(NOTICES_QUEUE, [{ notice, attempts: 1 }, { notice, attempts: 1 }]),
      deliver(NOTICES_QUEUE, [{ notice, attempts: 1 }]),
    ]);
    expect(pushes).toHaveLength(1);
    expect(sameBatch.acked + otherBatch.acked).toBe(1);
    const delays = [...sameBatch.retried, ...otherBatch.retried];
    expect(delays).toHaveLength(2);
    // Retried when the claim would have run out, to see how the push went.
    for (const delay of delays) expect(delay).toBeGreaterThanOrEqual(25);

    const late = await deliver(NOTICES_QUEUE, [{ notice, attempts: 2 }]);
    expect(late.acked).toBe(1);
    expect(pushes).toHaveLength(1);
  });

  it("a copy whose outbox row is gone (purged or dead-lettered) is acked without a push", async () => {
    const notice = newDeletionNotice({ receipt_id: idOn(SHARDS[0]), app_user_id: "au", chain_id: "c", client_id: "p" }, SHARDS[0]!);
    const result = await deliver(NOTICES_QUEUE, [{ notice, attempts: 1 }]);
    expect(result.acked).toBe(1);
    expect(pushes).toEqual([]);
  });
});

describe("docs/api.md#erasure no event of an erased app user's receipts reaches the app after its app_user.erased", () => {
  const erasedEvent = (madeAgoMs: number): AppUserErasedEvent => ({
    event_id: stampShardTag(uuidv7({ msecs: Date.now() - madeAgoMs }), SHARDS[0]!.tag),
    type: "app_user.erased",
    occurred_at: new Date().toISOString(),
    app_user_id: uniqueId("shopper"),
    receipts: 1,
  });

  it("the event waits out the claim of every push that began before it was made: retried, not pushed, then let through", async () => {
    const { claimMs } = deliveryTiming(notifierEnv());
    const held = await deliver(NOTICES_QUEUE, [{ notice: erasedEvent(0), attempts: 1 }]);
    expect(held.acked).toBe(0);
    expect(held.retried).toHaveLength(1);
    expect(held.retried[0]).toBeGreaterThanOrEqual(claimMs / 1000 - 1);
    expect(held.retried[0]).toBeLessThanOrEqual(claimMs / 1000);
    // Made longer ago than a claim lasts: on to its outbox row (none here, so acked unpushed).
    const due = await deliver(NOTICES_QUEUE, [{ notice: erasedEvent(claimMs + 1000), attempts: 1 }]);
    expect(due).toEqual({ acked: 1, retried: [] });
    expect(pushes).toEqual([]);
  });

  it("a push whose claim ran out before it began is not made: its message is retried, its event left for that copy", async () => {
    // On one shard, whose pushes go six at a time.
    const notices = await Promise.all(Array.from({ length: 42 }, () => recordedNotice(idOn(SHARDS[0]))));
    // Every push takes 0.7 s and a claim lasts 3 s (3 × PUSH_TIMEOUT_SECONDS): the sixth and
    // seventh rounds would begin after it.
    const answer = vi.mocked(fetch).getMockImplementation()!;
    vi.mocked(fetch).mockImplementation(async (...args) => {
      await new Promise((resolve) => setTimeout(resolve, 700));
      return answer(...args);
    });
    const outcome = await deliver(
      NOTICES_QUEUE,
      notices.map((notice) => ({ notice, attempts: 1 })),
      notifierEnv({ PUSH_TIMEOUT_SECONDS: "1" }),
    );
    expect(pushes.length).toBeGreaterThanOrEqual(18);
    expect(pushes.length).toBeLessThanOrEqual(30);
    expect(outcome.acked).toBe(pushes.length);
    expect(outcome.retried).toEqual(Array(42 - pushes.length).fill(1));
    const pushed = new Set(pushes.map((push) => (JSON.parse(push.body) as { event_id: string }).event_id));
    const unpushed = notices.filter((notice) => !pushed.has(notice.event_id));
    for (const notice of unpushed) expect(await outboxRows(notice.receipt_id)).toEqual([expect.objectContaining({ delivered_at: null })]);
  }, 30_000);
});

describe("docs/reliability.md#delivery-for-days a failed push's next attempt is kept in the outbox", () => {
  it("429, 5xx and a network failure: each acked, its next attempt recorded at a growing, jittered delay; delivered once", async () => {
    const notice = await recordedNotice();
    answers = [503, 429, new TypeError("Network connection lost."), 200];
    const workerEnv = notifierEnv({ PUSH_PROBE_SECONDS: "0.1" });
    const delays: number[] = [];
    for (let attempt = 1; attempt <= 3; attempt += 1) {
      const before = Date.now();
      // No queue retry: the cron hands the event over again when its attempt is due.
      expect(await deliver(NOTICES_QUEUE, [{ notice, attempts: 1 }], workerEnv)).toEqual({ acked: 1, retried: [] });
      const [row] = await outboxRows(notice.receipt_id);
      expect(row!.delivered_at).toBeNull();
      expect(row!.last_error).toMatch(attempt === 3 ? /^network: TypeError/ : `HTTP ${attempt === 1 ? 503 : 429}`);
      delays.push((Date.parse(row!.next_attempt_at!) - before) / 1000);
      // The window opens at the first failed attempt and stays.
      if (attempt === 1) expect(Date.parse(row!.retry_until!) - before).toBeGreaterThanOrEqual(72 * 3600_000 - 1000);
    }
    // 10 s doubling, each drawn between half of it and all of it (and a second for the clock).
    delays.forEach((delay, i) => {
      expect(delay).toBeGreaterThanOrEqual(5 * 2 ** i - 1);
      expect(delay).toBeLessThanOrEqual(10 * 2 ** i + 1);
    });
    // Three failures in a row: this isolate takes the push service for down and sends only a
    // probe when one is due; it gets through and delivery goes on.
    await new Promise((resolve) => setTimeout(resolve, 150));
    expect((await deliver(NOTICES_QUEUE, [{ notice, attempts: 1 }], workerEnv)).acked).toBe(1);
    expect(pushes).toHaveLength(4);
    expect(new Set(pushes.map((push) => push.headers["webhook-id"]))).toEqual(new Set([notice.event_id]));
    expect(new Set(pushes.map((push) => push.body)).size).toBe(1);
    const [row] = await outboxRows(notice.receipt_id);
    expect(row).toMatchObject({ attempts: 4, next_attempt_at: null });
    expect(row!.delivered_at).not.toBeNull();
    await deliver(NOTICES_QUEUE, [{ notice, attempts: 5 }], workerEnv);
    expect(pushes).toHaveLength(4);
  });

  it("a Retry-After longer than the backoff is honoured", async () => {
    const notice = await recordedNotice();
    answers = [new Response(null, { status: 429, headers: { "retry-after": "120" } })];
    const before = Date.now();
    await deliver(NOTICES_QUEUE, [{ notice, attempts: 1 }]);
    const [row] = await outboxRows(notice.receipt_id);
    expect(Date.parse(row!.next_attempt_at!) - before).toBeGreaterThanOrEqual(119_000);
  });

  it("the schedule: 10 s doubling to at most an hour, each delay drawn between half of it and all of it", () => {
    const { retry } = deliveryTiming(notifierEnv());
    const drawn = (random: number) => Array.from({ length: 12 }, (_, i) => retryDelaySeconds(i + 1, retry, random));
    expect(drawn(0.999_999)).toEqual([10, 20, 40, 80, 160, 320, 640, 1280, 2560, 3600, 3600, 3600]);
    expect(drawn(0)).toEqual([5, 10, 20, 40, 80, 160, 320, 640, 1280, 1800, 1800, 1800]);
    for (let i = 0; i < 200; i += 1) {
      const delay = retryDelaySeconds(8, retry, Math.random());
      expect(delay).toBeGreaterThanOrEqual(640);
      expect(delay).toBeLessThanOrEqual(1280);
    }
  });

  it("dead-lettered only once 72 hours of attempts failed: never before, and the last attempt on the window's end", () => {
    const { retry } = deliveryTiming(notifierEnv());
    const t0 = Date.parse("2026-11-23T12:00:00.000Z");
    let now = new Date(t0);
    let retryUntil: Date | null = null;
    let attempts = 1;
    for (;;) {
      const next = nextAttempt({ attempts, retryUntil }, retry, now, Math.random());
      if (next.deadLetter) break;
      expect(next.nextAttemptAt.getTime()).toBeGreaterThan(now.getTime());
      ({ retryUntil } = next);
      now = next.nextAttemptAt;
      attempts += 1;
    }
    expect(now.getTime() - t0).toBe(72 * 3600_000);
    // About 10 attempts to reach the hour, then one an hour or so (jitter halves some).
    expect(attempts).toBeGreaterThan(70);
    expect(attempts).toBeLessThan(150);
  });

  it("the time the push service was down as a whole does not count against an event's window, up to a window more", () => {
    const { retry } = deliveryTiming(notifierEnv());
    const t0 = new Date("2026-11-23T12:00:00.000Z");
    const retryUntil = new Date(t0.getTime() + retry.windowMs);
    // Failed after its window's end, with 5 hours of outage since it opened: 5 hours more.
    const late = new Date(retryUntil.getTime() + hour);
    const next = nextAttempt({ attempts: 40, retryUntil, pausedMs: 5 * hour }, retry, late, 0.5);
    expect(next).toMatchObject({ deadLetter: false, retryUntil });
    if (next.deadLetter) return;
    expect(next.nextAttemptAt.getTime()).toBeLessThanOrEqual(retryUntil.getTime() + 5 * hour);
    expect(nextAttempt({ attempts: 40, retryUntil, pausedMs: 5 * hour }, retry, new Date(retryUntil.getTime() + 5 * hour), 0.5)).toEqual({ deadLetter: true });
    // However long the outage, an event is dead-lettered two windows after it first failed at the latest.
    expect(nextAttempt({ attempts: 40, retryUntil, pausedMs: 10 * retry.windowMs }, retry, new Date(retryUntil.getTime() + retry.windowMs), 0.5)).toEqual({
      deadLetter: true,
    });
  });

  const hour = 3600_000;

  /** Sets the outbox row's columns `set` (SQL assignments over ?1) of `notice`'s event to `values`: a test's way of moving its times back. */
  async function setRow(notice: QueuedNotice, set: string, ...values: unknown[]): Promise<void> {
    await dbOf(notice.event_id).prepare(`UPDATE notice_outbox SET ${set} WHERE event_id = ?${values.length + 1}`).bind(...values, notice.event_id).run();
  }

  /**
   * `count` events that failed once (503) with a control beside them, every window (72 hours) set
   * back to have ended an hour ago (`now`): the control's next failure, with nothing since to
   * extend its window, dead-letters it, and it is stored as failed. After each batch the isolate
   * forgets the outage it takes three failures in a row for, so that the next pushes are made and
   * the test's own times of the push service stand. Returns the `count` events, each with its
   * next attempt still ahead.
   */
  async function windowsEndedAnHourAgo(count: number): Promise<{ notices: DeletionNotice[]; now: number }> {
    const forgetOutage = async () => {
      await forgetPushEndpoint();
      notifier = createNotifier();
    };
    const notices = await Promise.all(Array.from({ length: count }, () => recordedNotice()));
    const control = await recordedNotice();
    answers = [503];
    const all = [...notices, control];
    expect(await deliver(NOTICES_QUEUE, all.map((notice) => ({ notice, attempts: 1 })))).toEqual({ acked: all.length, retried: [] });
    await forgetOutage();
    const now = Date.now();
    for (const notice of all) await setRow(notice, "retry_until = ?1", new Date(now - hour).toISOString());
    // With no outage nor lateness since, the next failure is past the window: dead-lettered.
    expect(await deliver(NOTICES_QUEUE, [{ notice: control, attempts: 1 }])).toEqual({ acked: 1, retried: [] });
    expect(deadLetters).toEqual([control]);
    // Stored as failed, as the dead-letter queue's consumer does: until then its claim holds it,
    // and a later test's cron could hand it over as its probe.
    await deliver(FAILED_NOTICES_QUEUE, [{ notice: control, attempts: 1 }]);
    expect(await failedRows(control.receipt_id)).toHaveLength(1);
    deadLetters.length = 0;
    await forgetOutage();
    return { notices, now };
  }

  it("the notifier's own lateness does not count against an event's window either, and with the down time at most a window more in all", () => {
    const { retry } = deliveryTiming(notifierEnv());
    const retryUntil = new Date("2026-11-26T12:00:00.000Z");
    // Its attempts made 3 hours late in all, after 2 hours of outage: 5 hours more, kept for the outbox.
    const late = new Date(retryUntil.getTime() + 4 * hour);
    const next = nextAttempt({ attempts: 40, retryUntil, pausedMs: 2 * hour, lateMs: 3 * hour }, retry, late, 0.5);
    expect(next).toMatchObject({ deadLetter: false, retryUntil, lateMs: 3 * hour });
    if (next.deadLetter) return;
    expect(next.nextAttemptAt.getTime()).toBeLessThanOrEqual(retryUntil.getTime() + 5 * hour);
    expect(nextAttempt({ attempts: 40, retryUntil, pausedMs: 2 * hour, lateMs: 3 * hour }, retry, new Date(retryUntil.getTime() + 5 * hour), 0.5)).toEqual({
      deadLetter: true,
    });
    // Each under a window, together over it: the cap is shared.
    const most = { attempts: 40, retryUntil, pausedMs: 0.6 * retry.windowMs, lateMs: 0.6 * retry.windowMs };
    expect(nextAttempt(most, retry, new Date(retryUntil.getTime() + retry.windowMs - 1), 0.5)).toMatchObject({ deadLetter: false });
    expect(nextAttempt(most, retry, new Date(retryUntil.getTime() + retry.windowMs), 0.5)).toEqual({ deadLetter: true });
  });

  it("an outage while an event waits leaves it its retries: a failure past its window's first end is scheduled, not dead-lettered", async () => {
    const {
      notices: [waited],
      now,
    } = await windowsEndedAnHourAgo(1);
    // An outage of two hours that ended an hour ago: the notifier held the event back meanwhile.
    const dbs = SHARDS.map((shard) => shard.db);
    await markEndpointDown(dbs, new Date(now - 3 * hour), 1000);
    await markEndpointUp(dbs, new Date(now - hour));
    const [opened] = await outboxRows(waited!.receipt_id);
    expect(await deliver(NOTICES_QUEUE, [{ notice: waited!, attempts: 1 }])).toEqual({ acked: 1, retried: [] });
    expect(deadLetters).toEqual([]);
    const [rescheduled] = await outboxRows(waited!.receipt_id);
    expect(rescheduled).toMatchObject({ attempts: 2, retry_until: opened!.retry_until, delivered_at: null });
    // Its next attempt falls within the hour its window has left.
    expect(Date.parse(rescheduled!.next_attempt_at!)).toBeLessThanOrEqual(now + hour);
    // Nor does the dead-letter queue's consumer take it, should a copy of it end there.
    await deliver(FAILED_NOTICES_QUEUE, [{ notice: waited!, attempts: 11 }]);
    expect(await failedRows(waited!.receipt_id)).toEqual([]);
  });

  it("an attempt the notifier made late does not count against the event's window, up to a window more: a failure past its first end is scheduled; one on time past the end so extended dead-letters it", async () => {
    const {
      notices: [late, tooLate],
      now,
    } = await windowsEndedAnHourAgo(2);
    // Their attempts were due long ago, and the cron hands them over only now, as a notifier
    // starved of CPU does when its claims run out before their pushes: 3 hours late, and 10
    // windows late, past what any lateness may add.
    const windowMs = deliveryTiming(notifierEnv()).retry.windowMs;
    for (const [notice, lateMs] of [[late!, 3 * hour], [tooLate!, 10 * windowMs]] as const) {
      await setRow(notice, "next_attempt_at = ?1, attempt_due_at = ?1", new Date(now - lateMs).toISOString());
    }
    await setRow(tooLate!, "retry_until = ?1", new Date(now - windowMs - hour).toISOString());
    const handedOver = (await cronResend(new Date())).map((event) => event.event_id);
    expect(handedOver).toEqual(expect.arrayContaining([late!.event_id, tooLate!.event_id]));
    expect(await deliver(NOTICES_QUEUE, [late!, tooLate!].map((notice) => ({ notice, attempts: 1 })))).toEqual({ acked: 2, retried: [] });
    // The one late by 3 hours has 2 of its window left; the other met the cap, one window more.
    expect(deadLetters).toEqual([tooLate]);
    const [rescheduled] = await outboxRows(late!.receipt_id);
    expect(rescheduled).toMatchObject({ attempts: 2, delivered_at: null });
    const kept = await dbOf(late!.event_id).prepare("SELECT late_ms FROM notice_outbox WHERE event_id = ?1").bind(late!.event_id).first<number>("late_ms");
    expect(kept).toBeGreaterThanOrEqual(3 * hour);
    expect(Date.parse(rescheduled!.next_attempt_at!)).toBeLessThanOrEqual(Date.now() + 2 * hour);
    // Nor does the dead-letter queue's consumer take it, should a copy of it end there.
    await deliver(FAILED_NOTICES_QUEUE, [{ notice: late!, attempts: 11 }]);
    expect(await failedRows(late!.receipt_id)).toEqual([]);

    // Attempts made on time until the window so extended ended a minute ago: the next failure,
    // on time too, dead-letters it, and says its window ended, not that it was refused.
    const at = Date.now();
    await setRow(late!, "retry_until = ?1, next_attempt_at = ?2, attempt_due_at = ?2", new Date(at - kept! - 60_000).toISOString(), new Date(at).toISOString());
    const lines = await consoleLines(() => deliver(NOTICES_QUEUE, [{ notice: late!, attempts: 1 }]));
    expect(deadLetters).toEqual([tooLate, late]);
    const outcomes = lines.filter((line) => line.startsWith("{")).map((line) => JSON.parse(line) as { event?: string; outcome?: string });
    expect(outcomes).toContainEqual(expect.objectContaining({ event: "notice-delivery", outcome: "retry window ended; dead-lettered" }));
  });

  it("the timing settings: the claim outlasts three push timeouts; one that is not a positive number fails naming it", () => {
    expect(deliveryTiming(notifierEnv({ PUSH_TIMEOUT_SECONDS: "2" }))).toMatchObject({ pushTimeoutMs: 2000, claimMs: 6000 });
    for (const name of ["PUSH_TIMEOUT_SECONDS", "RETRY_FIRST_DELAY_SECONDS", "RETRY_MAX_DELAY_SECONDS", "PUSH_PROBE_SECONDS"] as const) {
      for (const value of ["0", "-1", "soon", ""]) {
        expect(() => deliveryTiming(notifierEnv({ [name]: value }))).toThrow(`${name} must be a positive number of seconds`);
      }
    }
  });

  it("unusable push settings: tried again on the schedule, nothing pushed, the cause recorded without the secret", async () => {
    const notice = await recordedNotice();
    const broken = notifierEnv({ APP_PUSH_SECRET: "not-a-webhook-secret" });
    const result = await deliver(NOTICES_QUEUE, [{ notice, attempts: 1 }], broken);
    expect(result).toEqual({ acked: 1, retried: [] });
    expect(pushes).toEqual([]);
    const [row] = await outboxRows(notice.receipt_id);
    expect(row!.next_attempt_at).not.toBeNull();
    expect(row!.last_error).toContain("APP_PUSH_SECRET");
    expect(row!.last_error).not.toContain("not-a-webhook-secret");
  });
});

describe("docs/reliability.md#backing-off-as-a-whole the notifier backs off as a whole while the push service is down", () => {
  const probeEnv = () => notifierEnv({ PUSH_PROBE_SECONDS: "0.2" });
  const waitForProbe = () => new Promise((resolve) => setTimeout(resolve, 250));
  const copies = (notices: readonly QueuedNotice[]) => notices.map((notice) => ({ notice: notice as DeletionNotice, attempts: 1 }));

  it("while down only probes are pushed, waiting events cost no attempt and no write; a probe that gets through resumes delivery, and the cron hands over the rest", async () => {
    const notices = await Promise.all(Array.from({ length: 10 }, () => recordedNotice()));
    const ids = new Set(notices.map((notice) => notice.event_id));
    answers = [503];
    // Three pushes fail in a row: the push service is down, for every isolate (the home shard says so).
    expect(await deliver(NOTICES_QUEUE, copies(notices.slice(0, 3)), probeEnv())).toEqual({ acked: 3, retried: [] });
    expect(pushes).toHaveLength(3);
    expect(await homeDb().prepare("SELECT down_since FROM push_endpoint").first("down_since")).not.toBeNull();

    // The next batch, before a probe is due: acked unpushed, nothing written to the outbox.
    const ledger = new StorageLedger();
    expect(await deliver(NOTICES_QUEUE, copies(notices.slice(3)), ledger.instrumentEnv(probeEnv()))).toEqual({ acked: 7, retried: [] });
    await ledger.drain();
    expect(ledger.names().filter((name) => name.startsWith("d1."))).toEqual(["d1.batch"]);
    expect(pushes).toHaveLength(3);
    for (const notice of notices.slice(3)) expect((await outboxRows(notice.receipt_id))[0]).toMatchObject({ attempts: 0, delivered_at: null });

    // While down, the cron offers one due event per shard to probe with, not every waiting one.
    const offered = (await cronResend(new Date())).filter((event) => ids.has(event.event_id));
    expect(offered.length).toBeLessThanOrEqual(SHARDS.length);

    // A probe when due: one push, still failing; the rest acked unpushed.
    await waitForProbe();
    expect((await deliver(NOTICES_QUEUE, copies(notices.slice(3)), probeEnv())).acked).toBe(7);
    expect(pushes).toHaveLength(4);

    // The push service is back: the next probe gets through, and the batch's other events follow at once.
    answers = [200];
    await waitForProbe();
    expect((await deliver(NOTICES_QUEUE, copies(notices.slice(3)), probeEnv())).acked).toBe(7);
    expect(pushes).toHaveLength(11);
    expect(await homeDb().prepare("SELECT down_since FROM push_endpoint").first("down_since")).toBeNull();

    // The cron hands over what waited, whatever its schedule said; copies of delivered events
    // cost no second push (the claim finds them delivered).
    const resent = (await cronResend(new Date())).filter((event) => ids.has(event.event_id));
    expect(new Set(resent.map((event) => event.event_id))).toEqual(new Set(notices.slice(0, 3).map((notice) => notice.event_id)));
    expect((await deliver(NOTICES_QUEUE, copies(resent), probeEnv())).acked).toBe(3);
    expect((await deliver(NOTICES_QUEUE, copies(notices), probeEnv())).acked).toBe(10);
    expect(pushes).toHaveLength(14);
    const delivered = pushes.slice(4).map((push) => push.headers["webhook-id"]!);
    expect(new Set(delivered)).toEqual(ids);
    expect(delivered).toHaveLength(10);
  });

  it("a probe that gets through while another shard's D1 fails: the home shard records it, its backlog goes out whole, and the failed shard learns it from its next push", async () => {
    const [home, failing, third] = [SHARDS[0]!, SHARDS[1]!, SHARDS[2]!];
    // The oldest event of the failed shard, held by a delivery that began just now, as an earlier
    // test's may be wherever its event fell: the cron below, half a minute ahead, finds it free.
    const held = await recordedNotice(idOn(failing));
    await failing.db
      .prepare("UPDATE notice_outbox SET claimed_until = ?1 WHERE event_id = ?2")
      .bind(new Date(Date.now() + 30_000).toISOString(), held.event_id)
      .run();
    const onHome = await Promise.all(Array.from({ length: 4 }, () => recordedNotice(idOn(home))));
    const onFailing = await Promise.all(Array.from({ length: 3 }, () => recordedNotice(idOn(failing))));
    const probe = await recordedNotice(idOn(third));
    answers = [503];
    await deliver(NOTICES_QUEUE, copies(onHome.slice(0, 3)), probeEnv());
    const downOn = (db: D1Database) => db.prepare("SELECT down_since FROM push_endpoint").first("down_since");
    for (const shard of SHARDS) expect(await downOn(shard.db)).not.toBeNull();

    // The push service is back; the probe's event lies on the third shard, and the second
    // shard's D1 fails every call meanwhile.
    answers = [200];
    await waitForProbe();
    const failingEnv = routeStorageCalls(probeEnv(), (site, invoke) =>
      site.binding === failing.binding ? Promise.reject(new Error("D1_ERROR: D1 DB is unavailable")) : invoke(),
    );
    expect((await deliver(NOTICES_QUEUE, copies([probe]), failingEnv)).acked).toBe(1);
    expect(pushes).toHaveLength(4);
    expect(await downOn(home.db)).toBeNull();
    expect(await downOn(failing.db)).not.toBeNull();

    // The home shard's cron hands over everything that waited there, not one probe candidate a tick.
    const later = Date.now() + 31_000;
    const homeIds = new Set(onHome.map((notice) => notice.event_id));
    const failingIds = new Set(onFailing.map((notice) => notice.event_id));
    const first = await cronResend(new Date(later));
    expect(first.filter((event) => homeIds.has(event.event_id))).toHaveLength(onHome.length);
    // The failed shard, healthy again, still says down: one probe candidate (the oldest due
    // event there, perhaps an earlier test's), which gets through; then the rest goes out.
    const candidates = first.filter((event) => shardOfId(SHARDS, event.event_id) === failing);
    expect(candidates).toHaveLength(1);
    // Delivered at the cron's moment: a claim that the cron found run out (an earlier test's
    // delivery, whose event fell on this shard) must be run out for the push too.
    vi.useFakeTimers({ toFake: ["Date"], now: later });
    try {
      expect((await deliver(NOTICES_QUEUE, copies(candidates), probeEnv())).acked).toBe(1);
    } finally {
      vi.useRealTimers();
    }
    expect(await downOn(failing.db)).toBeNull();
    const rest = await cronResend(new Date(later + 1_000));
    const handed = new Set([...candidates, ...rest].map((event) => event.event_id));
    expect([...failingIds].filter((id) => !handed.has(id))).toEqual([]);
  });

  it("each receipt's events in order after an outage: a receipt deleted while its created event waited has the deleted event alone", async () => {
    const owner = { clientId: uniqueId("pos"), secret: "", chains: [uniqueId("chain")] };
    let created: CreationNotice | undefined;
    const receipt = await seedReceipt(owner, {}, (fields) => {
      created = newCreationNotice({ ...fields, created_at: new Date().toISOString() }, shardOfId(SHARDS, fields.receipt_id)!);
      return created;
    });
    const shard = shardOfId(SHARDS, receipt.receipt_id)!;
    const others = await Promise.all([recordedNotice(), recordedNotice()]);
    answers = [503];
    await deliver(NOTICES_QUEUE, copies([created!, ...others]), probeEnv());
    expect(pushes).toHaveLength(3);
    // Deleted while the push service is down: its event waits too.
    const deleted = newDeletionNotice(receipt, shard);
    expect(await deleteOwnedReceipt(shard, deleted, await testUserKey(deleted.app_user_id), "test-request")).toEqual({ deleted: true });
    expect((await deliver(NOTICES_QUEUE, copies([deleted]), probeEnv())).acked).toBe(1);
    expect(pushes).toHaveLength(3);

    answers = [200];
    await waitForProbe();
    // The probe: one of the others, then the cron's copies of everything that waited, created first.
    await deliver(NOTICES_QUEUE, copies([others[0]!]), probeEnv());
    const resent = (await cronResend(new Date(Date.now() + 31_000))).filter((event) => "receipt_id" in event && event.receipt_id === receipt.receipt_id);
    expect(resent.map((event) => event.type)).toEqual(["receipt.created", "receipt.deleted"]);
    await deliver(NOTICES_QUEUE, copies(resent), probeEnv());
    const got = pushes.slice(3).filter((push) => JSON.parse(push.body).receipt_id === receipt.receipt_id);
    expect(got.map((push) => JSON.parse(push.body).type)).toEqual(["receipt.deleted"]);
    expect((await outboxRows(receipt.receipt_id)).every((row) => row.delivered_at !== null)).toBe(true);
  });
});

describe("docs/reliability.md#delivery-for-days a message of the cron's that carries several events", () => {
  /** Hands one bundle message to the notifier; returns whether it was acked, or its retry's delay. */
  async function deliverBundle(notices: readonly DeletionNotice[], workerEnv = notifierEnv(), queue = NOTICES_QUEUE): Promise<{ acked: boolean; retried?: number }> {
    const batch = createMessageBatch<NoticeMessage>(queue, [{ id: `bundle-${crypto.randomUUID()}`, timestamp: new Date(), attempts: 1, body: { events: [...notices] } }]);
    let retried: number | undefined;
    const [message] = batch.messages;
    const retry = message!.retry.bind(message);
    vi.spyOn(message!, "retry").mockImplementation((options) => {
      retried = options?.delaySeconds;
      retry(options);
    });
    const ctx = createExecutionContext();
    await notifier.queue(batch, workerEnv);
    const result = await getQueueResult(batch, ctx);
    return { acked: result.explicitAcks.length === 1, ...(result.retryMessages.length === 1 ? { retried } : {}) };
  }

  it("docs/api.md#event-feed each event of a bundle is pushed once, and the message acked once every event was", async () => {
    const notices = await Promise.all(Array.from({ length: 10 }, () => recordedNotice()));
    expect(await deliverBundle(notices)).toEqual({ acked: true });
    expect(new Set(pushes.map((push) => push.headers["webhook-id"]))).toEqual(new Set(notices.map((notice) => notice.event_id)));
    expect(pushes).toHaveLength(10);
    for (const notice of notices) expect((await outboxRows(notice.receipt_id))[0]).toMatchObject({ delivered_at: expect.any(String) });
  });

  it("a bundle one of whose events meets a D1 failure is retried whole after that event's delay; the others are not pushed again", async () => {
    const [home, other] = [SHARDS[0]!, SHARDS[1]!];
    const notices = [await recordedNotice(idOn(home)), await recordedNotice(idOn(other)), await recordedNotice(idOn(home))];
    const failing = routeStorageCalls(notifierEnv(), (site, invoke) =>
      site.binding === other.binding ? Promise.reject(new Error("D1_ERROR: D1 DB is unavailable")) : invoke(),
    );
    const first = await deliverBundle(notices, failing);
    expect(first).toMatchObject({ acked: false, retried: expect.any(Number) });
    expect(first.retried).toBeGreaterThan(0);
    expect(pushes).toHaveLength(2);
    expect(await deliverBundle(notices)).toEqual({ acked: true });
    expect(pushes.map((push) => push.headers["webhook-id"]).sort()).toEqual(notices.map((notice) => notice.event_id).sort());
  });

  it("one that met its queue retries is no dead letter: its events go back to the queue one by one, each with retries of its own, and stay in the outbox", async () => {
    const notices = [await recordedNotice(), await recordedNotice(), await recordedNotice()];
    expect(await deliverBundle(notices, notifierEnv(), FAILED_NOTICES_QUEUE)).toEqual({ acked: true });
    expect(requeued).toEqual(notices);
    for (const notice of notices) {
      expect(await failedRows(notice.receipt_id)).toEqual([]);
      expect(await outboxRows(notice.receipt_id)).toMatchObject([{ event_id: notice.event_id, delivered_at: null }]);
    }
    // Alone, each is delivered as any message is.
    expect(await deliver(NOTICES_QUEUE, requeued.map((notice) => ({ notice, attempts: 1 })))).toEqual({ acked: 3, retried: [] });
    expect(pushes.map((push) => push.headers["webhook-id"]).sort()).toEqual(notices.map((notice) => notice.event_id).sort());
  });

  it("one whose events could not be queued again is retried from the dead-letter queue, nothing stored", async () => {
    const notices = [await recordedNotice(), await recordedNotice()];
    const refusing = { ...notifierEnv(), NOTICES: { sendBatch: () => Promise.reject(new Error("Queue send failed")) } as unknown as Queue<QueuedNotice> };
    expect(await deliverBundle(notices, refusing, FAILED_NOTICES_QUEUE)).toEqual({ acked: false, retried: 30 });
    for (const notice of notices) expect(await failedRows(notice.receipt_id)).toEqual([]);
  });
});

describe("docs/api.md#deletion-notices delivery: dead letters and replay", () => {
  it("a 4xx that retrying cannot fix goes to the dead-letter queue at once; its consumer stores it with the last error", async () => {
    const notice = await recordedNotice();
    answers = [410];
    const lines = await consoleLines(async () => expect((await deliver(NOTICES_QUEUE, [{ notice, attempts: 1 }])).acked).toBe(1));
    expect(deadLetters).toEqual([notice]);
    // Its log line says it was refused, which the operator looks for the 4xx of.
    expect(lines.filter((line) => line.startsWith("{")).map((line) => JSON.parse(line))).toContainEqual(
      expect.objectContaining({ event: "notice-delivery", outcome: "refused; dead-lettered", cause: "HTTP 410 from the push service" }),
    );

    const stored = await deliver(FAILED_NOTICES_QUEUE, [{ notice, attempts: 1 }]);
    expect(stored.acked).toBe(1);
    expect(await outboxRows(notice.receipt_id)).toEqual([]);
    const [failed] = await failedRows(notice.receipt_id);
    expect(failed).toMatchObject({ event_id: notice.event_id, attempts: 1, last_error: "HTTP 410 from the push service" });
    expect(JSON.parse(failed!.payload as string)).toEqual(notice);
  });

  it("a refused event's copy that comes before its dead letter is stored is held, not pushed; once stored, a copy is acked unpushed", async () => {
    const notice = await recordedNotice();
    answers = [401, 500];
    expect(await deliver(NOTICES_QUEUE, [{ notice, attempts: 1 }])).toEqual({ acked: 1, retried: [] });
    expect(deadLetters).toEqual([notice]);
    // A re-send or a bundle retried whole, before the dead-letter queue's consumer ran.
    const early = await deliver(NOTICES_QUEUE, [{ notice, attempts: 1 }]);
    expect(early).toEqual({ acked: 0, retried: [expect.any(Number)] });
    expect(pushes).toHaveLength(1);
    await deliver(FAILED_NOTICES_QUEUE, [{ notice, attempts: 1 }]);
    expect(await failedRows(notice.receipt_id)).toMatchObject([{ event_id: notice.event_id, last_error: "HTTP 401 from the push service" }]);
    expect(await deliver(NOTICES_QUEUE, [{ notice, attempts: 2 }])).toEqual({ acked: 1, retried: [] });
    expect(pushes).toHaveLength(1);
  });

  it("one failing past its retry window ends as a stored failed notice, and replay delivers it once", async () => {
    const notice = await recordedNotice();
    answers = [503];
    // A window of about a third of a second (72 hours deployed), so that the test outlives it.
    const shortWindow = notifierEnv({ NOTICE_RETRY_HOURS: String(0.3 / 3600) });
    expect(await deliver(NOTICES_QUEUE, [{ notice, attempts: 1 }], shortWindow)).toEqual({ acked: 1, retried: [] });
    expect(deadLetters).toEqual([]);
    const [scheduled] = await outboxRows(notice.receipt_id);
    // The next attempt falls on the window's end at the latest.
    expect(scheduled!.next_attempt_at! <= scheduled!.retry_until!).toBe(true);
    await new Promise((resolve) => setTimeout(resolve, 350));
    expect(await deliver(NOTICES_QUEUE, [{ notice, attempts: 1 }], shortWindow)).toEqual({ acked: 1, retried: [] });
    expect(deadLetters).toEqual([notice]);
    await deliver(FAILED_NOTICES_QUEUE, [{ notice, attempts: 1 }]);
    expect(await failedRows(notice.receipt_id)).toMatchObject([
      { event_id: notice.event_id, attempts: 2, last_error: "HTTP 503 from the push service" },
    ]);

    // npm run notices -- replay <event_id>: one statement batch, as the command runs it.
    const replayed = await runBatch(dbOf(notice.event_id), replayFailed([notice.event_id]));
    expect(replayed.at(-1)!.results).toEqual([{ event_id: notice.event_id, receipt_id: notice.receipt_id }]);
    expect(await failedRows(notice.receipt_id)).toEqual([]);
    expect(await outboxRows(notice.receipt_id)).toMatchObject([{ enqueued_at: null, delivered_at: null, attempts: 0, retry_until: null }]);

    // The cron job sends it again; the push service is back.
    const sent: QueuedNotice[] = [];
    const queue = { sendBatch: async (messages: { body: NoticeMessage }[]) => void sent.push(...messages.flatMap((m) => noticesOf(m.body))) };
    await resendPendingNotices(
      { NOTICES: queue as unknown as Queue<NoticeMessage> },
      shardOfId(SHARDS, notice.event_id)!,
      new Date(Date.now() + 31_000),
      apiConfig(env),
    );
    expect(sent.filter((body) => body.event_id === notice.event_id)).toEqual([notice]);
    answers = [200];
    pushes = [];
    expect((await deliver(NOTICES_QUEUE, [{ notice, attempts: 1 }])).acked).toBe(1);
    expect(pushes).toHaveLength(1);
    expect((await outboxRows(notice.receipt_id))[0]!.delivered_at).not.toBeNull();
  });

  it("a copy that met the queue's retries while its event is within its retry window is no dead letter: the event stays to its schedule and is delivered when due", async () => {
    const notice = await recordedNotice();
    answers = [500];
    expect(await deliver(NOTICES_QUEUE, [{ notice, attempts: 1 }])).toEqual({ acked: 1, retried: [] });
    const [scheduled] = await outboxRows(notice.receipt_id);
    expect(scheduled!.next_attempt_at).not.toBeNull();
    // Another copy of it (a re-send, a bundle's event) held, then run out of claims, ten times over.
    expect(await deliver(FAILED_NOTICES_QUEUE, [{ notice, attempts: 11 }])).toEqual({ acked: 1, retried: [] });
    expect(await failedRows(notice.receipt_id)).toEqual([]);
    expect(await outboxRows(notice.receipt_id)).toMatchObject([
      { event_id: notice.event_id, delivered_at: null, next_attempt_at: scheduled!.next_attempt_at, last_error: "HTTP 500 from the push service" },
    ]);

    // The cron job hands it over when its attempt is due, and the push service is back.
    const sent: QueuedNotice[] = [];
    const queue = { sendBatch: async (messages: { body: NoticeMessage }[]) => void sent.push(...messages.flatMap((m) => noticesOf(m.body))) };
    const due = new Date(Date.parse(scheduled!.next_attempt_at!) + 1);
    await resendPendingNotices({ NOTICES: queue as unknown as Queue<NoticeMessage> }, shardOfId(SHARDS, notice.event_id)!, due, apiConfig(env));
    expect(sent.filter((body) => body.event_id === notice.event_id)).toEqual([notice]);
    answers = [200];
    expect((await deliver(NOTICES_QUEUE, [{ notice, attempts: 1 }])).acked).toBe(1);
    expect((await outboxRows(notice.receipt_id))[0]!.delivered_at).not.toBeNull();
  });

  it("a dead letter of a notice delivered meanwhile by another copy is not stored", async () => {
    const notice = await recordedNotice();
    await deliver(NOTICES_QUEUE, [{ notice, attempts: 1 }]);
    await deliver(FAILED_NOTICES_QUEUE, [{ notice, attempts: 1 }]);
    expect(await failedRows(notice.receipt_id)).toEqual([]);
    expect(await outboxRows(notice.receipt_id)).toHaveLength(1);
  });

  it("a dead letter delivered twice is stored once", async () => {
    const notice = await recordedNotice();
    answers = [400];
    await deliver(NOTICES_QUEUE, [{ notice, attempts: 1 }]);
    await deliver(FAILED_NOTICES_QUEUE, [{ notice, attempts: 1 }]);
    expect((await deliver(FAILED_NOTICES_QUEUE, [{ notice, attempts: 2 }])).acked).toBe(1);
    expect(await failedRows(notice.receipt_id)).toHaveLength(1);
  });
});

describe("docs/api.md#deletion-notices delivery: no push URL (plain local development)", () => {
  it("logs each notice as one structured JSON line without secrets, marks it delivered and acks", async () => {
    const notice = await recordedNotice();
    const lines: string[] = [];
    vi.spyOn(console, "log").mockImplementation((line: string) => void lines.push(line));
    const result = await deliver(NOTICES_QUEUE, [{ notice, attempts: 1 }], notifierEnv({ APP_PUSH_URL: undefined }));
    expect(result.acked).toBe(1);
    expect(pushes).toEqual([]);
    const logged = lines.map((line) => JSON.parse(line) as Record<string, unknown>).filter((line) => line.event === "notice");
    expect(logged).toHaveLength(1);
    expect(logged[0]).toMatchObject({ level: "info", ...notice });
    expect(lines.join("\n")).not.toContain(TEST_PUSH_SECRET.slice("whsec_".length));
    expect((await outboxRows(notice.receipt_id))[0]!.delivered_at).not.toBeNull();
  });
});

describe("docs/api.md#receipt-events the notifier works per batch, not per message", () => {
  async function roundTripsFor(count: number): Promise<string[]> {
    const notices = await Promise.all(Array.from({ length: count }, () => recordedNotice(idOn(SHARDS[0]))));
    const ledger = new StorageLedger();
    const result = await deliver(
      NOTICES_QUEUE,
      notices.map((notice) => ({ notice, attempts: 1 })),
      ledger.instrumentEnv(notifierEnv()),
    );
    await ledger.drain();
    expect(result.acked).toBe(count);
    return ledger.names().filter((name) => name.startsWith("d1."));
  }

  it("a batch of 100 events on one shard costs the D1 round trips of a batch of 10: one claim, one record", async () => {
    const ten = await roundTripsFor(10);
    pushes = [];
    const hundred = await roundTripsFor(100);
    expect(ten).toEqual(["d1.all", "d1.batch"]);
    expect(hundred).toEqual(ten);
    expect(pushes).toHaveLength(100);
  });
});

