/**
 * GET /receipts/v2/status (docs/api.md#status): an operator's monitor reads the
 * service's health, 200 while healthy, 503 naming every threshold passed; POS and app tokens get
 * 403. The test stops the push receiver (the notifier's pushes fail until it marks the push
 * service down) and closes every shard, sees the status turn unhealthy, then brings both back and
 * sees it healthy again.
 */
import { createExecutionContext, createMessageBatch, getQueueResult, waitOnExecutionContext } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { v7 as uuidv7 } from "uuid";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { createApp } from "../../../src/api/app.ts";
import { newIsolateState, type IsolateState } from "../../../src/api/context.ts";
import type { HealthReport } from "../../../src/shared/health-report.ts";
import type { NotifierEnv } from "../../../src/shared/env.ts";
import { PATHS } from "../../../src/shared/paths.ts";
import { shardStateKey } from "../../../src/shared/shard-ids.ts";
import { APP_SCOPE, OPS_SCOPE, type DeletionNotice } from "../../../src/shared/types.ts";
import { createNotifier } from "../../../src/notifier/index.ts";
import { healthReport } from "../../../src/api/status/health.ts";
import { statusThresholds } from "../../../src/shared/config.ts";
import { LEGACY_PREFIX } from "../../../src/storage/archive/layout.ts";
import { idOnShard } from "../../../src/storage/shards.ts";
import { EXPECTED_MIGRATION } from "../../../src/storage/health.ts";
import { BASE, call, expectErrorShape, issueClient, loginHeadersFor, loginToken, uniqueId } from "../../support/api.ts";
import { TEST_PUSH_SECRET } from "../../support/keys.ts";
import { DEPLOYED_PUSH_SETTINGS, deletedNotice, forgetPushEndpoint, seedReceipt } from "../../support/notices.ts";
import { SHARDS, dbOf } from "../../support/shards.ts";
import { recordingQueue } from "../../support/queues.ts";

/** Thresholds a test can pass in a second, and no reuse of a computed status. */
const FAST = { STATUS_CACHE_SECONDS: "0", STATUS_DELIVERY_LATE_SECONDS: "1", STATUS_ENDPOINT_DOWN_SECONDS: "1" };

async function opsHeaders(): Promise<Record<string, string>> {
  const client = await issueClient({ chains: [], scopes: [OPS_SCOPE], clientId: uniqueId("ops") });
  const login = await call(PATHS.login, { headers: { ...loginHeadersFor(client), scope: OPS_SCOPE } });
  expect(login.status, JSON.stringify(login.body)).toBe(200);
  return { Authorization: `Bearer ${login.body.data.access_token}`, client_id: client.clientId };
}

/** GET /receipts/v2/status on an app with these settings and this isolate's memory. */
async function statusOf(
  headers: Record<string, string>,
  settings: Record<string, string> = FAST,
  isolate: IsolateState = newIsolateState(),
  method = "GET",
): Promise<{ status: number; headers: Headers; body: any }> {
  const ctx = createExecutionContext();
  const response = await createApp(isolate).fetch(new Request(BASE + PATHS.status, { method, headers }), { ...env, ...settings }, ctx);
  const text = await response.text();
  await waitOnExecutionContext(ctx);
  return { status: response.status, headers: response.headers, body: text === "" ? null : JSON.parse(text) };
}

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

let pushAnswer: number;
beforeEach(async () => {
  await forgetPushEndpoint();
  pushAnswer = 200;
  vi.stubGlobal("fetch", vi.fn(async (input: RequestInfo | URL, init?: RequestInit) => {
    await new Request(input, init).text();
    return new Response(null, { status: pushAnswer });
  }));
});
afterEach(async () => {
  vi.unstubAllGlobals();
  await forgetPushEndpoint();
  await Promise.all(SHARDS.map((shard) => env.SHARD_STATES.delete(shardStateKey(shard.name))));
});

/** The notifier, as deployed but probing every 0.2 s, with the test's stubbed push service. */
const notifierEnv = (): NotifierEnv => ({
  ...Object.fromEntries(SHARDS.map((shard) => [shard.binding, shard.db])),
  NOTICES: recordingQueue(),
  FAILED_NOTICES: recordingQueue(),
  APP_PUSH_URL: "https://push.example.test/receipts",
  APP_PUSH_SECRET: TEST_PUSH_SECRET,
  ...DEPLOYED_PUSH_SETTINGS,
  PUSH_PROBE_SECONDS: "0.2",
});

async function deliver(notifier: ReturnType<typeof createNotifier>, notices: readonly DeletionNotice[]): Promise<void> {
  const batch = createMessageBatch<DeletionNotice>(
    "receipts-v2-notices",
    notices.map((notice) => ({ id: crypto.randomUUID(), timestamp: new Date(), attempts: 1, body: notice })),
  );
  const ctx = createExecutionContext();
  await notifier.queue(batch, notifierEnv());
  await getQueueResult(batch, ctx);
}

describe("docs/api.md#status GET /receipts/v2/status", () => {
  it("healthy: 200, every shard open, migrated and read, in the seed's success shape", async () => {
    const answer = await statusOf(await opsHeaders());
    expect(answer.status, JSON.stringify(answer.body)).toBe(200);
    expect(answer.headers.get("content-type")).toBe("application/json; charset=utf-8");
    expect(answer.body).toMatchObject({ status: "OK", status_code: 200 });
    const report = answer.body.data as HealthReport;
    expect(report).toMatchObject({ healthy: true, reasons: [], delivery: { undelivered: 0, failed_notices: 0, endpoint: { down: false } } });
    expect(report.shards.map((shard) => [shard.name, shard.state, shard.latest_migration, shard.migrations_lagging])).toEqual(
      SHARDS.map((shard) => [shard.name, "open", EXPECTED_MIGRATION, false]),
    );
    for (const shard of report.shards) {
      expect(shard.bytes).toBeGreaterThan(0);
      expect(shard.read_at).toBe(report.checked_at);
    }
    expect(report.clients.active).toBeGreaterThanOrEqual(1);
  });

  it("push receiver stopped and every shard closed: 503 naming each; receiver back and shards open: 200 again", async () => {
    const headers = await opsHeaders();
    const notifier = createNotifier();
    const notices = [await deletedNotice(), await deletedNotice(), await deletedNotice()];

    // The receiver stops: three pushes fail in a row, and the notifier marks it down.
    pushAnswer = 503;
    await deliver(notifier, notices);
    for (const shard of SHARDS) await env.SHARD_STATES.put(shardStateKey(shard.name), JSON.stringify({ state: "closed", by: "operator" }));
    await pause(1_500);

    const down = await statusOf(headers);
    expect(down.status).toBe(503);
    expect(down.body).toMatchObject({ status: "Service Unavailable", status_code: 503, message: expect.stringMatching(/^Unhealthy: /) });
    const codes = (down.body.data as HealthReport).reasons.map((reason) => reason.code);
    expect(codes).toEqual(expect.arrayContaining(["no_open_shard", "endpoint_down", "delivery_late"]));
    expect(down.body.message).toContain("no_open_shard");
    expect(down.body.message).toContain("endpoint_down");
    const report = down.body.data as HealthReport;
    expect(report.delivery.undelivered).toBe(3);
    expect(report.delivery.endpoint.down).toBe(true);
    expect(report.shards.every((shard) => shard.state === "closed")).toBe(true);

    // Back: the shards open, the receiver answers, the next probe gets through and the rest follow.
    for (const shard of SHARDS) await env.SHARD_STATES.delete(shardStateKey(shard.name));
    pushAnswer = 200;
    await pause(250);
    await deliver(notifier, notices);
    const up = await statusOf(headers);
    expect(up.status, JSON.stringify(up.body.data?.reasons)).toBe(200);
    expect(up.body.data).toMatchObject({ healthy: true, delivery: { undelivered: 0, endpoint: { down: false } } });
  });

  it("an open shard past the fill share is named, a closed one is not", async () => {
    const headers = await opsHeaders();
    const filling = await statusOf(headers, { ...FAST, STATUS_FILL_SHARE: "0.0000001" });
    expect(filling.status).toBe(503);
    const reasons = (filling.body.data as HealthReport).reasons;
    expect(reasons.filter((reason) => reason.code === "shard_filling").map((reason) => reason.shard)).toEqual(SHARDS.map((shard) => shard.name));
    await env.SHARD_STATES.put(shardStateKey(SHARDS[0]!.name), JSON.stringify({ state: "closed", by: "operator" }));
    const oneClosed = await statusOf(headers, { ...FAST, STATUS_FILL_SHARE: "0.0000001" });
    expect((oneClosed.body.data as HealthReport).reasons.filter((reason) => reason.code === "shard_filling").map((reason) => reason.shard)).toEqual(
      SHARDS.slice(1).map((shard) => shard.name),
    );
  });

  it("an object of the archive's first layout left names its shard as first_layout_left, the reason erasures refuse to start; gone, healthy again", async () => {
    const headers = await opsHeaders();
    const key = `${LEGACY_PREFIX}${encodeURIComponent(uniqueId("shopper"))}/c1/2026-01/${SHARDS[1]!.name}.ndjson`;
    await env.ARCHIVE.put(key, "");
    try {
      const left = await statusOf(headers);
      expect(left.status).toBe(503);
      expect(left.body.message).toContain("first_layout_left");
      expect((left.body.data as HealthReport).reasons.filter((reason) => reason.code === "first_layout_left").map((reason) => reason.shard)).toEqual([SHARDS[1]!.name]);
    } finally {
      await env.ARCHIVE.delete(key);
    }
    expect((await statusOf(headers)).status).toBe(200);
  });

  it("reused within STATUS_CACHE_SECONDS: a second call in the same isolate reads no shard", async () => {
    const headers = await opsHeaders();
    const isolate = newIsolateState();
    const first = await statusOf(headers, { ...FAST, STATUS_CACHE_SECONDS: "30" }, isolate);
    for (const shard of SHARDS) await env.SHARD_STATES.put(shardStateKey(shard.name), JSON.stringify({ state: "closed", by: "operator" }));
    const second = await statusOf(headers, { ...FAST, STATUS_CACHE_SECONDS: "30" }, isolate);
    expect(second.status).toBe(200);
    expect(second.body.data.checked_at).toBe(first.body.data.checked_at);
  });

  it("POS and app tokens: 403 naming the scope; no token: 400; other methods: 405 with Allow", async () => {
    const pos = await issueClient();
    const posAnswer = await statusOf({ Authorization: `Bearer ${await loginToken(pos)}`, client_id: pos.clientId });
    expect(expectErrorShape(posAnswer, 403, "Forbidden")).toContain("Header Authorization holds a token without the service.ops scope");
    const app = await issueClient({ chains: [], scopes: [APP_SCOPE], clientId: uniqueId("app") });
    const appLogin = await call(PATHS.login, { headers: { ...loginHeadersFor(app), scope: APP_SCOPE } });
    const appAnswer = await statusOf({ Authorization: `Bearer ${appLogin.body.data.access_token}`, client_id: app.clientId });
    expect(expectErrorShape(appAnswer, 403, "Forbidden")).toContain("service.ops");
    expect(expectErrorShape(await statusOf({}), 400, "Bad Request")).toContain("Authorization");
    for (const method of ["POST", "PUT", "DELETE"]) {
      const answer = await statusOf(await opsHeaders(), FAST, newIsolateState(), method);
      expect(answer.status).toBe(405);
      expect(answer.headers.get("allow")).toBe("GET, HEAD");
    }
  });

  it("an ops token on add: 403 naming service.pos", async () => {
    const headers = await opsHeaders();
    const answer = await call(PATHS.add, { headers: { ...headers, chain_id: "c1", app_user_id: "au-1", "Content-Type": "application/json" }, body: "{}" });
    expect(expectErrorShape(answer, 403, "Forbidden")).toContain("service.pos");
  });
});

describe("docs/operations.md#status archive_behind counts from when a receipt falls due, its month wholly past the archive age", () => {
  it("a receipt past the age whose month is not wholly past it is not behind; one whose month fell due days ago is", async () => {
    const DAY_MS = 24 * 60 * 60 * 1000;
    // Now less 45 days is 6 October: September's receipts fell due on 15 November, October's wait for 15 December.
    const now = new Date("2026-11-20T12:00:00.000Z");
    const client = await issueClient();
    const [waitingShard, lateShard] = [SHARDS[0]!, SHARDS[1]!];
    const waiting = await seedReceipt(client, { receipt_id: idOnShard(uuidv7({ msecs: Date.parse("2026-10-02T00:00:00.000Z") }), waitingShard) });
    const late = await seedReceipt(client, { receipt_id: idOnShard(uuidv7({ msecs: Date.parse("2026-09-20T00:00:00.000Z") }), lateShard) });
    try {
      const report = await healthReport(
        {
          shards: SHARDS,
          shardStates: env.SHARD_STATES,
          clients: env.CLIENTS,
          archive: env.ARCHIVE,
          config: { shardFillBytes: Number.MAX_SAFE_INTEGER, archiveAfterMs: 45 * DAY_MS },
          thresholds: statusThresholds({ ...env, STATUS_CACHE_SECONDS: "0", STATUS_ARCHIVE_BEHIND_HOURS: "36" }),
        },
        newIsolateState().health,
        now,
      );
      const byName = new Map(report.shards.map((shard) => [shard.name, shard]));
      // 49.5 days old, 108 h past the age: waiting for October to be wholly 45 days old.
      expect(byName.get(waitingShard.name)).toMatchObject({ oldest_receipt_at: "2026-10-02T00:00:00.000Z", archive_behind_hours: 0 });
      // Due since 15 November 00:00: 132 h.
      expect(byName.get(lateShard.name)).toMatchObject({ oldest_receipt_at: "2026-09-20T00:00:00.000Z", archive_behind_hours: 132 });
      expect(report.reasons.filter(({ code }) => code === "archive_behind").map(({ shard }) => shard)).toEqual([lateShard.name]);
    } finally {
      for (const receipt of [waiting, late]) await dbOf(receipt.receipt_id).prepare("DELETE FROM receipts WHERE receipt_id = ?1").bind(receipt.receipt_id).run();
    }
  });
});
