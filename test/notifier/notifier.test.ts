/**
 * The notifier's queue handler driven message by message (createMessageBatch/getQueueResult),
 * with the push service stubbed as globalThis.fetch. The notices are recorded in the outbox as
 * delete does, but never sent to the real queue, so the notifier running beside the API does not
 * take part here (test/notifier/flow.test.ts is where it does).
 */
import { createExecutionContext, createMessageBatch, getQueueResult } from "cloudflare:test";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { newDeletionNotice } from "../../src/api/events.ts";
import { env } from "cloudflare:workers";
import { apiConfig, deliveryTiming } from "../../src/shared/config.ts";
import { resendPendingNotices } from "../../src/api/scheduled.ts";
import type { NotifierEnv } from "../../src/shared/env.ts";
import type { DeletionNotice } from "../../src/shared/types.ts";
import { FAILED_NOTICES_QUEUE } from "../../src/notifier/dead-letters.ts";
import notifier from "../../src/notifier/index.ts";
import { retryDelaySeconds } from "../../src/notifier/retry.ts";
import { replayFailed } from "../../src/storage/outbox/statements.ts";
import { deleteOwnedReceipt } from "../../src/storage/receipts.ts";
import { runBatch } from "../../src/storage/statement.ts";
import { uniqueId } from "../support/api.ts";
import { TEST_PUSH_SECRET } from "../support/keys.ts";
import { failedRows, outboxRows, seedReceipt, verifyStandardWebhook } from "../support/notices.ts";
import { SHARDS, dbOf, idOn } from "../support/shards.ts";
import { shardOfId } from "../../src/storage/shards.ts";
import { StorageLedger } from "../support/storage-ledger.ts";

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

beforeEach(() => {
  pushes = [];
  answers = [200];
  deadLetters = [];
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

afterEach(() => {
  vi.unstubAllGlobals();
  vi.restoreAllMocks();
});

type Settings = "APP_PUSH_URL" | "APP_PUSH_SECRET" | "PUSH_TIMEOUT_SECONDS" | "RETRY_FIRST_DELAY_SECONDS" | "RETRY_MAX_DELAY_SECONDS";

function notifierEnv(settings: Partial<Pick<NotifierEnv, Settings>> = {}): NotifierEnv {
  return {
    ...Object.fromEntries(SHARDS.map((shard) => [shard.binding, shard.db])),
    FAILED_NOTICES: {
      send: async (body: DeletionNotice) => {
        deadLetters.push(body);
      },
      sendBatch: async () => {},
    } as unknown as Queue<DeletionNotice>,
    APP_PUSH_URL: PUSH_URL,
    APP_PUSH_SECRET: TEST_PUSH_SECRET,
    // As src/notifier/wrangler.toml deploys them.
    PUSH_TIMEOUT_SECONDS: "10",
    RETRY_FIRST_DELAY_SECONDS: "10",
    RETRY_MAX_DELAY_SECONDS: "600",
    ...settings,
  };
}

/** A receipt deleted as delete does it: gone, and its notice in the outbox, not enqueued. */
async function recordedNotice(receiptId?: string): Promise<DeletionNotice> {
  const owner = { clientId: uniqueId("pos"), secret: "", chains: [uniqueId("chain")] };
  const receipt = await seedReceipt(owner, receiptId === undefined ? {} : { receipt_id: receiptId });
  const shard = shardOfId(SHARDS, receipt.receipt_id)!;
  const notice = newDeletionNotice(receipt, shard);
  expect(await deleteOwnedReceipt(shard.db, notice, "test-request")).toEqual({ deleted: true });
  return notice;
}

/** What the notifier did with a batch: acks, and the delay of each retry, in message order. */
interface Outcome {
  acked: number;
  retried: (number | undefined)[];
}

/** Hands messages to the notifier as the queue would, and returns what it acked and retried. */
async function deliver(
  queue: string,
  messages: { notice: DeletionNotice; attempts: number }[],
  workerEnv = notifierEnv(),
): Promise<Outcome> {
  const batch = createMessageBatch<DeletionNotice>(
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

describe("docs/api.md#deletion-notices delivery: retries with growing delay", () => {
  it("429, 5xx and network failures three times, then a 2xx: retried at growing delays, delivered once", async () => {
    const notice = await recordedNotice();
    answers = [503, 429, new TypeError("Network connection lost."), 200];
    const delays: (number | undefined)[] = [];
    for (let attempts = 1; attempts <= 3; attempts += 1) {
      const result = await deliver(NOTICES_QUEUE, [{ notice, attempts }]);
      expect(result.acked).toBe(0);
      delays.push(...result.retried);
      const [row] = await outboxRows(notice.receipt_id);
      expect(row!.delivered_at).toBeNull();
      expect(row!.last_error).toMatch(attempts === 3 ? /^network: TypeError/ : `HTTP ${attempts === 1 ? 503 : 429}`);
    }
    expect(delays).toEqual([10, 20, 40]);
    const last = await deliver(NOTICES_QUEUE, [{ notice, attempts: 4 }]);
    expect(last.acked).toBe(1);
    expect(pushes).toHaveLength(4);
    // Every attempt carries the same event id and body, each signed anew.
    expect(new Set(pushes.map((push) => push.headers["webhook-id"]))).toEqual(new Set([notice.event_id]));
    expect(new Set(pushes.map((push) => push.body)).size).toBe(1);
    const [row] = await outboxRows(notice.receipt_id);
    expect(row!.attempts).toBe(4);
    expect(row!.delivered_at).not.toBeNull();
    // Delivered: a late copy is not pushed again.
    await deliver(NOTICES_QUEUE, [{ notice, attempts: 5 }]);
    expect(pushes).toHaveLength(4);
  });

  it("a Retry-After longer than the backoff is honoured", async () => {
    const notice = await recordedNotice();
    answers = [new Response(null, { status: 429, headers: { "retry-after": "120" } })];
    expect((await deliver(NOTICES_QUEUE, [{ notice, attempts: 1 }])).retried).toEqual([120]);
  });

  it("the schedule: 10 s doubling to at most 10 minutes, about 50 minutes over max_retries = 10", () => {
    const { retry } = deliveryTiming(notifierEnv());
    const schedule = Array.from({ length: 10 }, (_, i) => retryDelaySeconds(i + 1, retry));
    expect(schedule).toEqual([10, 20, 40, 80, 160, 320, 600, 600, 600, 600]);
    expect(schedule.reduce((sum, delay) => sum + delay, 0)).toBe(3030);
  });

  it("the timing settings: the claim outlasts three push timeouts; one that is not a positive number fails naming it", () => {
    expect(deliveryTiming(notifierEnv({ PUSH_TIMEOUT_SECONDS: "2" }))).toMatchObject({ pushTimeoutMs: 2000, claimMs: 6000 });
    for (const name of ["PUSH_TIMEOUT_SECONDS", "RETRY_FIRST_DELAY_SECONDS", "RETRY_MAX_DELAY_SECONDS"] as const) {
      for (const value of ["0", "-1", "soon", ""]) {
        expect(() => deliveryTiming(notifierEnv({ [name]: value }))).toThrow(`${name} must be a positive number of seconds`);
      }
    }
  });

  it("unusable push settings: retried, nothing pushed, the cause recorded without the secret", async () => {
    const notice = await recordedNotice();
    const broken = notifierEnv({ APP_PUSH_SECRET: "not-a-webhook-secret" });
    const result = await deliver(NOTICES_QUEUE, [{ notice, attempts: 1 }], broken);
    expect(result.retried).toEqual([10]);
    expect(pushes).toEqual([]);
    const [row] = await outboxRows(notice.receipt_id);
    expect(row!.last_error).toContain("APP_PUSH_SECRET");
    expect(row!.last_error).not.toContain("not-a-webhook-secret");
  });
});

describe("docs/api.md#deletion-notices delivery: dead letters and replay", () => {
  it("a 4xx that retrying cannot fix goes to the dead-letter queue at once; its consumer stores it with the last error", async () => {
    const notice = await recordedNotice();
    answers = [410];
    const result = await deliver(NOTICES_QUEUE, [{ notice, attempts: 1 }]);
    expect(result.acked).toBe(1);
    expect(deadLetters).toEqual([notice]);

    const stored = await deliver(FAILED_NOTICES_QUEUE, [{ notice, attempts: 1 }]);
    expect(stored.acked).toBe(1);
    expect(await outboxRows(notice.receipt_id)).toEqual([]);
    const [failed] = await failedRows(notice.receipt_id);
    expect(failed).toMatchObject({ event_id: notice.event_id, attempts: 1, last_error: "HTTP 410 from the push service" });
    expect(JSON.parse(failed!.payload as string)).toEqual(notice);
  });

  it("one failing for good exhausts its retries, ends as a stored failed notice, and replay delivers it once", async () => {
    const notice = await recordedNotice();
    answers = [503];
    const delays: (number | undefined)[] = [];
    // max_retries = 10 in src/notifier/wrangler.toml: 11 attempts, then Queues dead-letters it.
    for (let attempts = 1; attempts <= 11; attempts += 1) {
      delays.push(...(await deliver(NOTICES_QUEUE, [{ notice, attempts }])).retried);
    }
    expect(delays).toEqual([10, 20, 40, 80, 160, 320, 600, 600, 600, 600, 600]);
    expect(deadLetters).toEqual([]);
    await deliver(FAILED_NOTICES_QUEUE, [{ notice, attempts: 1 }]);
    expect(await failedRows(notice.receipt_id)).toMatchObject([
      { event_id: notice.event_id, attempts: 11, last_error: "HTTP 503 from the push service" },
    ]);

    // npm run notices -- replay <event_id>: one statement batch, as wrangler d1 execute runs it.
    const replayed = await runBatch(dbOf(notice.event_id), replayFailed([notice.event_id]));
    expect(replayed.at(-1)!.results).toEqual([{ event_id: notice.event_id, receipt_id: notice.receipt_id }]);
    expect(await failedRows(notice.receipt_id)).toEqual([]);
    expect(await outboxRows(notice.receipt_id)).toMatchObject([{ enqueued_at: null, delivered_at: null, attempts: 0 }]);

    // The cron job sends it again; the push service is back.
    const sent: DeletionNotice[] = [];
    const queue = { sendBatch: async (messages: { body: DeletionNotice }[]) => void sent.push(...messages.map((m) => m.body)) };
    await resendPendingNotices(
      { NOTICES: queue as unknown as Queue<DeletionNotice> },
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

/** Runs SQL text of several statements as one D1 batch, as `wrangler d1 execute --command` does. */
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

