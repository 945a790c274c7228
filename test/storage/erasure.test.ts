/**
 * docs/api.md#erasure: the erasure of src/storage/erasure.ts on the test run's three shards, run
 * through each shard's D1 batch as `npm run app-users` runs it through `wrangler d1 execute`
 * (test/scripts/app-users.test.ts runs the script itself).
 */
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { runScheduledJobs } from "../../src/api/scheduled.ts";
import { PATHS } from "../../src/shared/paths.ts";
import type { AppUserErasedEvent } from "../../src/shared/schemas.ts";
import { ERASURE_PAGE, eraseAppUser, pseudonym, type ErasureShard } from "../../src/storage/erasure.ts";
import { runBatch, type Statement } from "../../src/storage/statement.ts";
import { call, newCaller, postAdd, uniqueId, type Caller } from "../support/api.ts";
import { expectSignedPush, seedReceipt, waitForPushes } from "../support/notices.ts";
import { SHARDS, dbOf, idOn, rowsOnEveryShard } from "../support/shards.ts";

const HASH_KEY = crypto.getRandomValues(new Uint8Array(32));

/** The shards as the erasure takes them; `calls` counts the batches run on each. */
function erasureShards(calls: { statements: number; erased: number }[] = []): ErasureShard[] {
  return SHARDS.map((shard) => ({
    ...shard,
    run: async (statements) => {
      const results = await runBatch(shard.db, statements);
      calls.push({ statements: statements.length, erased: results[4]?.results.length ?? 0 });
      return results.map(({ results: rows }) => rows);
    },
  }));
}

const erase = (appUserId: string, shards = erasureShards()) => eraseAppUser(appUserId, shards, HASH_KEY);

/** Every row anywhere that belongs to one app user, table by table (what erasure must empty). */
async function tracesOf(appUserId: string): Promise<Record<string, number>> {
  const ids = `(SELECT receipt_id FROM receipts WHERE app_user_id = ?1
    UNION SELECT receipt_id FROM audit_log WHERE app_user = ?1 AND receipt_id IS NOT NULL)`;
  const count = async (sql: string) =>
    (await rowsOnEveryShard<{ n: number }>(sql, appUserId)).reduce((sum, { n }) => sum + n, 0);
  return {
    receipts: await count("SELECT COUNT(*) AS n FROM receipts WHERE app_user_id = ?1"),
    idempotency_keys: await count(`SELECT COUNT(*) AS n FROM idempotency_keys WHERE receipt_id IN ${ids}`),
    // The erasure's own event names the app user: it is what tells the app.
    notice_outbox: await count(`SELECT COUNT(*) AS n FROM notice_outbox
      WHERE json_extract(payload, '$.app_user_id') = ?1 AND json_extract(payload, '$.type') <> 'app_user.erased'`),
    failed_notices: await count("SELECT COUNT(*) AS n FROM failed_notices WHERE json_extract(payload, '$.app_user_id') = ?1"),
    audit_log: await count("SELECT COUNT(*) AS n FROM audit_log WHERE app_user = ?1"),
  };
}

const NO_TRACES = { receipts: 0, idempotency_keys: 0, notice_outbox: 0, failed_notices: 0, audit_log: 0 };

/**
 * An app user with data of every kind: receipts added through the API with and without a key
 * (their created events in the outbox), one on every shard put in directly, one deleted (its
 * notice and audit record), and a failed notice. Returns the receipts still held.
 */
async function appUserWithData(caller: Caller, appUserId: string): Promise<string[]> {
  const headers = { ...caller.headers, app_user_id: appUserId };
  const held: string[] = [];
  for (const key of [uniqueId("till"), uniqueId("till"), undefined]) {
    const answer = await postAdd(key ? { ...headers, "Idempotency-Key": key } : headers);
    expect(answer.status).toBe(200);
    held.push(answer.body.data.receipt_id);
  }
  for (const shard of SHARDS) {
    held.push((await seedReceipt(caller.client, { receipt_id: idOn(shard), app_user_id: appUserId })).receipt_id);
  }
  const gone = held.shift()!;
  const deleted = await call(PATHS.delete, {
    headers: { Authorization: caller.headers.Authorization!, receipt_id: gone, client_id: caller.client.clientId, chain_id: caller.client.chains[0]!, app_user_id: appUserId },
  });
  expect(deleted.status).toBe(200);
  // A dead letter of one of their receipts' events, as the dead-letter consumer keeps it.
  const [event] = await rowsOnEveryShard<{ event_id: string }>("SELECT event_id FROM notice_outbox WHERE receipt_id = ?", held[0]);
  await dbOf(event!.event_id).prepare(
    `INSERT INTO failed_notices (event_id, receipt_id, payload, created_at, failed_at, attempts, last_error)
     SELECT event_id, receipt_id, payload, created_at, created_at, 11, 'HTTP 410' FROM notice_outbox WHERE event_id = ?1`,
  ).bind(event!.event_id).run();
  return held;
}

describe("docs/api.md#erasure erases exactly one app user's data, in every shard", () => {
  it("removes their receipts, Idempotency-Key answers, outbox rows and failed notices everywhere, and pseudonymises their audit records; neighbours keep everything", async () => {
    const caller = await newCaller();
    const victim = uniqueId("shopper");
    // Others whose IDs would be caught by a prefix match, a case-blind match or a LIKE pattern.
    const neighbours = [`${victim}0`, victim.slice(0, -1), victim.toUpperCase(), `${victim.slice(0, -1)}_`, `${victim.slice(0, -1)}%`];
    const held = await appUserWithData(caller, victim);
    for (const neighbour of neighbours) await appUserWithData(caller, neighbour);
    const before = await Promise.all(neighbours.map(tracesOf));
    const present = await tracesOf(victim);
    expect(present.receipts).toBe(held.length);
    // Every kind of copy is there to erase.
    for (const [table, rows] of Object.entries(present)) expect(rows, table).toBeGreaterThan(0);

    const erasure = await erase(victim);

    expect(erasure.receipts_erased).toBe(held.length);
    expect(Object.keys(erasure.shards)).toEqual(SHARDS.map((shard) => shard.name));
    for (const shard of SHARDS) expect(erasure.shards[shard.name]).toBeGreaterThanOrEqual(1);
    expect(await tracesOf(victim)).toEqual(NO_TRACES);
    expect(await Promise.all(neighbours.map(tracesOf))).toEqual(before);

    // Their audit records stay, with the keyed hash in place of the app_user_id: the deletion,
    // one per erased receipt, and the erasure's own.
    const hashed = await pseudonym(victim, HASH_KEY);
    const records = await rowsOnEveryShard<Record<string, unknown>>("SELECT * FROM audit_log WHERE app_user = ? ORDER BY audit_id", hashed);
    expect(records.filter((record) => record.action === "receipt.deleted")).toHaveLength(1);
    expect(records.filter((record) => record.action === "app_user.erased" && record.receipt_id !== null).map((record) => record.receipt_id).sort()).toEqual([...held].sort());
    expect(records.filter((record) => record.receipt_id === null)).toEqual([
      expect.objectContaining({ action: "app_user.erased", client_id: "operator", chain_id: null, request_id: erasure.event.event_id }),
    ]);
    expect(JSON.stringify(records)).not.toContain(victim);
  });

  it("a second run erases 0 and succeeds, with an event of its own", async () => {
    const caller = await newCaller();
    const victim = uniqueId("shopper");
    await appUserWithData(caller, victim);
    const first = await erase(victim);
    const second = await erase(victim);
    expect(second.receipts_erased).toBe(0);
    expect(second.event).toMatchObject({ type: "app_user.erased", app_user_id: victim, receipts: 0 });
    expect(second.event.event_id).not.toBe(first.event.event_id);
  });

  it.each([
    ["single quotes", "o'brien' OR '1'='1"],
    ["a statement after a semicolon", "x'; DELETE FROM receipts; --"],
    ["a comment", "-- x /* y */"],
    ["LIKE wildcards", "%"],
    ["one-character wildcard", "_"],
    ["backslashes", "a\\'b\\\\"],
    ["double quotes", '"receipts"'],
    ["256 characters of quotes", "'".repeat(256)],
  ])("a hostile app_user_id (%s) erases its own receipts and nothing of anyone else's", async (_label, hostile) => {
    const caller = await newCaller();
    const own = await Promise.all(SHARDS.map((shard) => seedReceipt(caller.client, { receipt_id: idOn(shard), app_user_id: hostile })));
    const others = await Promise.all(SHARDS.map((shard) => seedReceipt(caller.client, { receipt_id: idOn(shard) })));
    const count = async () => (await rowsOnEveryShard<{ n: number }>("SELECT COUNT(*) AS n FROM receipts")).reduce((sum, { n }) => sum + n, 0);
    const total = await count();

    const erasure = await erase(hostile);

    expect(erasure.receipts_erased).toBe(own.length);
    expect((await tracesOf(hostile)).receipts).toBe(0);
    expect(await count()).toBe(total - erasure.receipts_erased);
    const left = await rowsOnEveryShard<{ app_user_id: string }>("SELECT app_user_id FROM receipts");
    expect(left.every((row) => row.app_user_id !== hostile)).toBe(true);
    for (const other of others) expect(left.some((row) => row.app_user_id === other.app_user_id)).toBe(true);
  });
});

describe("docs/api.md#erasure works in bounded steps", () => {
  it(`erases 10,000 receipts in batches of at most ${ERASURE_PAGE}, and a run stopped half way is simply run again`, async () => {
    const caller = await newCaller();
    const victim = uniqueId("collector");
    const [big, small] = SHARDS;
    // One statement makes the rows inside D1, with IDs on the shard (its tag in rand_a).
    const prefix = idOn(big!).slice(0, 24);
    await big!.db.prepare(
      `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 10000)
       INSERT INTO receipts (receipt_id, chain_id, client_id, app_user_id, body, created_at)
       SELECT ?1 || printf('%012d', i), ?2, ?3, ?4, '{}', ?5 FROM n`,
    ).bind(prefix, caller.client.chains[0], caller.client.clientId, victim, new Date().toISOString()).run();
    await seedReceipt(caller.client, { receipt_id: idOn(small!), app_user_id: victim });

    // The first run stops after its fifth batch, as a stopped terminal or a failing shard would.
    const calls: { statements: number; erased: number }[] = [];
    const stopping = erasureShards(calls).map((shard) => ({
      ...shard,
      run: async (statements: readonly Statement[]) => {
        if (calls.length === 5) throw new Error("stopped");
        return shard.run(statements);
      },
    }));
    await expect(erase(victim, stopping)).rejects.toThrow("stopped");
    const erasedFirst = calls.reduce((sum, call) => sum + call.erased, 0);
    expect(erasedFirst).toBe(5 * ERASURE_PAGE);
    expect((await tracesOf(victim)).receipts).toBe(10_001 - erasedFirst);

    calls.length = 0;
    const again = await erase(victim, erasureShards(calls));
    expect(again.receipts_erased).toBe(10_001 - erasedFirst);
    expect(await tracesOf(victim)).toEqual(NO_TRACES);
    // No batch grows with the app user: each erased at most a page, in a fixed number of statements.
    expect(Math.max(...calls.map((call) => call.erased))).toBe(ERASURE_PAGE);
    expect(new Set(calls.map((call) => call.statements)).size).toBeLessThanOrEqual(2);
    const audited = await rowsOnEveryShard<{ n: number }>("SELECT COUNT(*) AS n FROM audit_log WHERE app_user = ? AND receipt_id IS NOT NULL", await pseudonym(victim, HASH_KEY));
    expect(audited.reduce((sum, { n }) => sum + n, 0)).toBe(10_001);
  }, 60_000);
});

describe("docs/api.md#erasure the app_user.erased event", () => {
  it("is recorded on the first shard and delivered to the app push service, signed, by the cron job's send", async () => {
    const caller = await newCaller();
    const victim = uniqueId("shopper");
    await appUserWithData(caller, victim);
    const erasure = await erase(victim);
    expect(erasure.event.event_id.slice(15, 18)).toBe(SHARDS[0]!.tag.toString(16).padStart(3, "0"));

    // Never enqueued by the script: the cron job sends it once its grace period is over.
    await runScheduledJobs(env, new Date(Date.now() + 31_000));
    const [push] = await waitForPushes(erasure.event.event_id);
    const body = (await expectSignedPush(push!)) as unknown as AppUserErasedEvent;
    expect(body).toEqual({ ...erasure.event, receipts: erasure.receipts_erased });
    expect(body).toMatchObject({ type: "app_user.erased", app_user_id: victim });
  });
});
