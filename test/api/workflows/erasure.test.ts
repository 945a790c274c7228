/**
 * docs/api.md#erasure: the erasure's Workflow (src/api/workflows/erasure-workflow.ts) on the test run's
 * three shards, started through its binding as `npm run app-users -- erase` starts it, and driven
 * with the vitest plugin's Workflow introspection: steps that fail and resume, adds racing the
 * erasure, keyed retries after it, re-runs and two erasures of one app user at once.
 */
import { requestErasure, startErasure } from "../../../src/api/workflows/erasure-workflow.ts";
import { env } from "cloudflare:workers";
import { introspectWorkflow, introspectWorkflowInstance } from "cloudflare:test";
import { describe, expect, it, vi } from "vitest";
import { newCreationNotice } from "../../../src/api/events.ts";
import { runScheduledJobs } from "../../../src/api/scheduled.ts";
import { parseAuditHashKey } from "../../../src/shared/audit-hash-key.ts";
import { ConfigError, apiConfig } from "../../../src/shared/config.ts";
import { erasureOfPart } from "../../../src/shared/job-ids.ts";
import { timeOfId } from "../../../src/shared/shard-ids.ts";
import { PATHS } from "../../../src/shared/paths.ts";
import type { AppUserErasedEvent } from "../../../src/shared/schemas.ts";
import { ERASURE_PAGE, eraseAppUser, pseudonym, type Erasure } from "../../../src/storage/erasure.ts";
import { deadLetter as consumeDeadLetter, settleEvents } from "../../../src/storage/outbox/operations.ts";
import type { JobShard, StepRunner } from "../../../src/storage/steps.ts";
import { storeReceipt } from "../../../src/storage/receipts.ts";
import { runBatch } from "../../../src/storage/statement.ts";
import { call, consoleLines, newCaller, postAdd, uniqueId, type Caller } from "../../support/api.ts";
import { TEST_AUDIT_HASH_KEY } from "../../support/keys.ts";
import { expectSignedPush, seedReceipt, waitForDelivery, waitForPushes } from "../../support/notices.ts";
import { erase } from "../../support/erasure.ts";
import { SHARDS, dbOf, idOn, rowsOnEveryShard } from "../../support/shards.ts";

const HASH_KEY = parseAuditHashKey(TEST_AUDIT_HASH_KEY);

/** Every row anywhere that belongs to one app user, table by table (what erasure must empty). */
async function tracesOf(appUserId: string): Promise<Record<string, number>> {
  const ids = `(SELECT receipt_id FROM receipts WHERE app_user_id = ?1
    UNION SELECT receipt_id FROM audit_log WHERE app_user = ?1 AND receipt_id IS NOT NULL)`;
  const count = async (sql: string) =>
    (await rowsOnEveryShard<{ n: number }>(sql, appUserId)).reduce((sum, { n }) => sum + n, 0);
  return {
    receipts: await count("SELECT COUNT(*) AS n FROM receipts WHERE app_user_id = ?1"),
    idempotency_keys: await count(`SELECT COUNT(*) AS n FROM idempotency_keys
      WHERE (receipt_id IN ${ids} AND erased_at IS NULL) OR json_extract(response, '$.data.app_user_id') = ?1`),
    // The latest erasure's own event names the app user until it is delivered: it is what tells the app.
    notice_outbox: await count(`SELECT COUNT(*) AS n FROM notice_outbox
      WHERE json_extract(payload, '$.app_user_id') = ?1 AND json_extract(payload, '$.type') <> 'app_user.erased'`),
    failed_notices: await count("SELECT COUNT(*) AS n FROM failed_notices WHERE json_extract(payload, '$.app_user_id') = ?1"),
    audit_log: await count("SELECT COUNT(*) AS n FROM audit_log WHERE app_user = ?1"),
  };
}

const NO_TRACES = { receipts: 0, idempotency_keys: 0, notice_outbox: 0, failed_notices: 0, audit_log: 0 };

/** The outbox and failed rows of erasure events that name the app user. */
async function erasedEventsNaming(appUserId: string): Promise<{ event_id: string; where: string }[]> {
  const of = (table: string) =>
    rowsOnEveryShard<{ event_id: string; where: string }>(
      `SELECT event_id, '${table}' AS "where" FROM ${table}
      WHERE json_extract(payload, '$.type') = 'app_user.erased' AND json_extract(payload, '$.app_user_id') = ?1`,
      appUserId,
    );
  return [...(await of("notice_outbox")), ...(await of("failed_notices"))];
}

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
  await deadLetter(held[0]!);
  return held;
}

/** Moves the outbox rows filed under `receiptId` to the failed events, as the dead-letter consumer does. */
async function deadLetter(receiptId: string): Promise<void> {
  const [event] = await rowsOnEveryShard<{ event_id: string }>("SELECT event_id FROM notice_outbox WHERE receipt_id = ?", receiptId);
  const db = dbOf(event!.event_id);
  await db.batch([
    db.prepare(
      `INSERT INTO failed_notices (event_id, receipt_id, payload, created_at, failed_at, attempts, last_error)
       SELECT event_id, receipt_id, payload, created_at, created_at, 11, 'HTTP 410' FROM notice_outbox WHERE event_id = ?1`,
    ).bind(event!.event_id),
    db.prepare("DELETE FROM notice_outbox WHERE event_id = ?1").bind(event!.event_id),
  ]);
}

describe("docs/api.md#erasure erases exactly one app user's data, in every shard", () => {
  it("removes their receipts, outbox rows and failed notices everywhere, keeps their Idempotency-Key records without the ID, and pseudonymises their audit records; neighbours keep everything", async () => {
    const caller = await newCaller();
    const victim = uniqueId("shopper");
    // Others whose IDs would be caught by a prefix match, a case-blind match or a LIKE pattern.
    const neighbours = [`${victim}0`, victim.slice(0, -1), victim.toUpperCase(), `${victim.slice(0, -1)}_`, `${victim.slice(0, -1)}%`];
    const held = await appUserWithData(caller, victim);
    for (const neighbour of neighbours) await appUserWithData(caller, neighbour);
    const before = await Promise.all(neighbours.map(tracesOf));
    const present = await tracesOf(victim);
    expect(present.receipts).toBe(held.length);
    for (const [table, rows] of Object.entries(present)) expect(rows, table).toBeGreaterThan(0);

    const erasure = await erase(victim);

    expect(erasure.receipts_erased).toBe(held.length);
    expect(Object.keys(erasure.shards)).toEqual(SHARDS.map((shard) => shard.name));
    for (const shard of SHARDS) expect(erasure.shards[shard.name]).toBeGreaterThanOrEqual(1);
    expect(await tracesOf(victim)).toEqual(NO_TRACES);
    expect(await Promise.all(neighbours.map(tracesOf))).toEqual(before);
    const kept = await rowsOnEveryShard<{ erased_at: string }>("SELECT erased_at FROM idempotency_keys WHERE receipt_id IN (SELECT value FROM json_each(?))", JSON.stringify(held));
    expect(kept).toEqual([{ erased_at: erasure.event.occurred_at }]);

    const hashed = await pseudonym(victim, HASH_KEY);
    const records = await rowsOnEveryShard<Record<string, unknown>>("SELECT * FROM audit_log WHERE app_user = ? ORDER BY audit_id", hashed);
    expect(records.filter((record) => record.action === "receipt.deleted")).toHaveLength(1);
    expect(records.filter((record) => record.action === "app_user.erased" && record.receipt_id !== null).map((record) => record.receipt_id).sort()).toEqual([...held].sort());
    expect(records.filter((record) => record.receipt_id === null)).toEqual([
      expect.objectContaining({ action: "app_user.erased", client_id: "operator", chain_id: null, request_id: erasure.event.event_id }),
    ]);
    expect(JSON.stringify(records)).not.toContain(victim);
  }, 60_000);

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
    for (const other of others) expect(left.some((row) => row.app_user_id === other.app_user_id)).toBe(true);
  });

  it("refuses an app_user_id that add would refuse, and erases nothing", async () => {
    const id = uniqueId("erasure");
    await using instance = await introspectWorkflowInstance(env.ERASURE, id);
    await startErasure(env, "user-42, user-43", id);
    await instance.waitForStatus("errored");
  });
});

describe("docs/api.md#erasure runs as durable, bounded steps", () => {
  it("ERASURE_PART_SHARDS sets the shards of a part: 500 when unset, refused as a setting outside 1 to 500", () => {
    const { ERASURE_PART_SHARDS: _set, ...unset } = env;
    expect(apiConfig(unset).erasurePartShards).toBe(500);
    expect(apiConfig({ ...env, ERASURE_PART_SHARDS: "500" }).erasurePartShards).toBe(500);
    for (const bad of ["0", "501", "2.5", "-1", "many", ""]) {
      expect(() => apiConfig({ ...env, ERASURE_PART_SHARDS: bad }), bad).toThrow(new ConfigError("ERASURE_PART_SHARDS must be a whole number from 1 to 500"));
    }
  });

  it("a step that fails is retried, and the instance ends as an undisturbed one would, with one app_user.erased event", async () => {
    const caller = await newCaller();
    const victim = uniqueId("shopper");
    const held = await appUserWithData(caller, victim);
    const erasure = await erase(victim, async (m) => {
      await m.mockStepError({ name: `erase ${SHARDS[1]!.name} page 0` }, new Error("D1 unavailable"), 2);
      await m.mockStepError({ name: "record and send" }, new Error("D1 unavailable"), 2);
    });
    expect(erasure.receipts_erased).toBe(held.length);
    expect(await tracesOf(victim)).toEqual(NO_TRACES);
    expect(await erasedEventsNaming(victim)).toEqual([{ event_id: erasure.event.event_id, where: "notice_outbox" }]);
  });

  it("a step of a part that keeps failing fails the part and then the erasure, each with an error log line an alert can match; its receipts wait for a restart", async () => {
    const caller = await newCaller();
    const victim = uniqueId("shopper");
    await appUserWithData(caller, victim);
    const id = uniqueId("erasure");
    let error: { name: string; message: string } | undefined;
    const lines = await consoleLines(async () => {
      await using parts = await introspectWorkflow(env.ERASURE);
      await parts.modifyAll(async (m) => {
        await m.disableRetryDelays();
        await m.mockStepError({ name: `erase ${SHARDS[2]!.name} page 0` }, new Error("D1 unavailable"));
      });
      await using instance = await introspectWorkflowInstance(env.ERASURE, id);
      await startErasure(env, victim, id);
      await instance.waitForStatus("errored");
      error = await instance.getError();
    });
    const failures = lines.filter((line) => line.includes('"event":"job"')).map((line) => JSON.parse(line) as Record<string, unknown>);
    const part = failures[0]?.instance_id as string;
    expect(erasureOfPart(part)).toBe(id);
    expect(failures).toEqual([
      expect.objectContaining({ level: "error", event: "job", job: "erasure part", instance_id: part, outcome: "failed" }),
      expect.objectContaining({ level: "error", event: "job", job: "erasure", instance_id: id, outcome: "failed" }),
    ]);
    expect(error!.message).toContain(`erasure part ${part} errored`);
    expect(error!.message).toContain("D1 unavailable");
    expect(JSON.stringify(failures)).not.toContain(victim);
    expect(await erasedEventsNaming(victim)).toEqual([]);
  });

  it("every step run again after it committed (a restart between commit and record) leaves the same end state and counts each receipt once", async () => {
    const caller = await newCaller();
    const victim = uniqueId("shopper");
    const held = await appUserWithData(caller, victim);
    const names: string[] = [];
    const twice = async <T,>(name: string, work: () => Promise<T>) => {
      names.push(name);
      await work();
      return work();
    };
    const erasure = await eraseAppUser(victim, erasureShards(), HASH_KEY, { steps: twice });
    expect(erasure.receipts_erased).toBe(held.length);
    expect(await tracesOf(victim)).toEqual(NO_TRACES);
    expect(await erasedEventsNaming(victim)).toHaveLength(1);
    const own = await rowsOnEveryShard("SELECT 1 FROM audit_log WHERE request_id = ? AND receipt_id IS NULL", erasure.event.event_id);
    expect(own).toHaveLength(1);
    expect(names).toEqual(["begin", ...SHARDS.map((shard) => `erase ${shard.name} page 0`), "record and send"]);
  });

  it(`erases 10,000 receipts a page of at most ${ERASURE_PAGE} per step, each step one batch`, async () => {
    const caller = await newCaller();
    const victim = uniqueId("collector");
    const [big, small] = SHARDS;
    // One statement makes the rows inside D1, with IDs on the shard (its tag in rand_a).
    const prefix = idOn(big!).slice(0, 24);
    await big!.db.prepare(
      `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 10000)
       INSERT INTO receipts (receipt_id, chain_id, client_id, app_user_id, body, created_at)
       SELECT ?1 || printf('%012d', i), ?2, ?3, ?4, '{}', ?5 FROM n`,
    ).bind(prefix, caller.client.chains[0], caller.client.clientId, victim, new Date(Date.now() - 1000).toISOString()).run();
    await seedReceipt(caller.client, { receipt_id: idOn(small!), app_user_id: victim });

    const batches: { statements: number; erased: number }[] = [];
    const erasure = await eraseAppUser(victim, erasureShards(batches), HASH_KEY);
    expect(erasure.receipts_erased).toBe(10_001);
    expect(await tracesOf(victim)).toEqual(NO_TRACES);
    expect(Math.max(...batches.map((batch) => batch.erased))).toBe(ERASURE_PAGE);
    // No batch grows with the app user: a fixed number of statements (page 0 also fences).
    expect(new Set(batches.map((batch) => batch.statements)).size).toBeLessThanOrEqual(3);
  }, 60_000);
});

describe("docs/api.md#erasure is an instant: adds racing it", () => {
  it("an add created at or before the instant that lands after the fence is answered as stored and erased: nothing stored, no event; one created after it stays", async () => {
    const victim = uniqueId("shopper");
    const erasure = await erase(victim);
    const userKey = await pseudonym(victim, HASH_KEY);
    const instant = Date.parse(erasure.event.occurred_at);
    for (const shard of SHARDS) {
      for (const [createdAt, kind] of [[instant - 5, "erased"], [instant, "erased"], [instant + 1, "added"]] as const) {
        const data = { receipt_id: idOn(shard), chain_id: "chain-1", client_id: "pos-1", app_user_id: victim, created_at: new Date(createdAt).toISOString() };
        const event = newCreationNotice(data, shard);
        for (const key of [undefined, uniqueId("till")]) {
          const claim = key === undefined ? undefined : { key, fingerprint: "f", response: { data, status: "OK" as const, status_code: 200 as const } };
          const receipt = { ...data, receipt_id: key ? idOn(shard) : data.receipt_id, body: "{}", user_key: userKey };
          const outcome = await storeReceipt(shard, receipt, { ...event, receipt_id: receipt.receipt_id, event_id: idOn(shard) }, claim);
          expect(outcome.kind, `${shard.name} ${createdAt - instant} ms ${key ? "keyed" : "unkeyed"}`).toBe(kind);
          const stored = await rowsOnEveryShard("SELECT 1 FROM receipts WHERE receipt_id = ?", receipt.receipt_id);
          const events = await rowsOnEveryShard("SELECT 1 FROM notice_outbox WHERE receipt_id = ?", receipt.receipt_id);
          expect([stored.length, events.length]).toEqual(kind === "added" ? [1, 1] : [0, 0]);
          if (key) {
            const [record] = await rowsOnEveryShard<{ response: string; erased_at: string | null }>("SELECT response, erased_at FROM idempotency_keys WHERE idempotency_key = ?", key);
            expect(record!.erased_at === null).toBe(kind === "added");
            expect(record!.response.includes(victim)).toBe(kind === "added");
          }
        }
      }
    }
  });

  it("the cron job purges a fence an hour after its instant, on every shard", async () => {
    const victim = uniqueId("shopper");
    const erasure = await erase(victim);
    const userKey = await pseudonym(victim, HASH_KEY);
    const fences = () => rowsOnEveryShard("SELECT instant FROM erasure_fences WHERE user_key = ?", userKey);
    expect(await fences()).toHaveLength(SHARDS.length);
    await runScheduledJobs(env, new Date(Date.parse(erasure.event.occurred_at) + 59 * 60_000));
    expect(await fences()).toHaveLength(SHARDS.length);
    await runScheduledJobs(env, new Date(Date.parse(erasure.event.occurred_at) + 61 * 60_000));
    expect(await fences()).toEqual([]);
  });

  it("through the API: an add after the erasure completes is the app user's anew and stays", async () => {
    const caller = await newCaller();
    const victim = uniqueId("shopper");
    await appUserWithData(caller, victim);
    await erase(victim);
    const after = await postAdd({ ...caller.headers, app_user_id: victim });
    expect(after.status).toBe(200);
    expect(await rowsOnEveryShard("SELECT 1 FROM receipts WHERE receipt_id = ?", after.body.data.receipt_id)).toHaveLength(1);
  });
});

describe("docs/api.md#erasure a receipt created after the instant is the app user's anew", () => {
  it("its deletion's event and its Idempotency-Key record stay, though an erasure still running meets its audit record", async () => {
    const caller = await newCaller();
    const victim = uniqueId("shopper");
    const key = uniqueId("till");
    const added = await postAdd({ ...caller.headers, app_user_id: victim, "Idempotency-Key": key });
    expect(added.status).toBe(200);
    const receiptId = added.body.data.receipt_id;
    const deleted = await call(PATHS.delete, {
      headers: { Authorization: caller.headers.Authorization!, receipt_id: receiptId, client_id: caller.client.clientId, chain_id: caller.client.chains[0]!, app_user_id: victim },
    });
    expect(deleted.status).toBe(200);
    // An erasure whose instant came before this add, still sweeping when the delete committed.
    const instant = new Date(Date.parse(added.body.data.created_at) - 1_000);
    await eraseAppUser(victim, erasureShards(), HASH_KEY, { now: () => instant });
    const events = await rowsOnEveryShard<{ payload: string }>("SELECT payload FROM notice_outbox WHERE receipt_id = ?", receiptId);
    expect(events.map(({ payload }) => (JSON.parse(payload) as { type: string }).type).sort()).toEqual(["receipt.created", "receipt.deleted"]);
    const [record] = await rowsOnEveryShard<{ erased_at: string | null }>("SELECT erased_at FROM idempotency_keys WHERE idempotency_key = ?", key);
    expect(record).toEqual({ erased_at: null });
  });
});

describe("docs/api.md#erasure a keyed retry after an erasure", () => {
  it("gets the first answer again, stores nothing and records no event", async () => {
    const caller = await newCaller();
    const victim = uniqueId("shopper");
    const headers = { ...caller.headers, app_user_id: victim, "Idempotency-Key": uniqueId("till") };
    const first = await postAdd(headers);
    expect(first.status).toBe(200);
    await erase(victim);

    const retry = await postAdd(headers);

    expect(retry.status).toBe(200);
    expect(retry.body).toEqual(first.body);
    expect(JSON.stringify(Object.keys(retry.body.data))).toBe(JSON.stringify(Object.keys(first.body.data)));
    expect((await tracesOf(victim)).receipts).toBe(0);
    expect(await rowsOnEveryShard("SELECT 1 FROM notice_outbox WHERE json_extract(payload, '$.app_user_id') = ? AND json_extract(payload, '$.type') = 'receipt.created'", victim)).toEqual([]);
  });
});

// At once: each case has an app user and events of its own, and two wait out a claim's length (30 s).
describe.concurrent("docs/api.md#erasure the app_user.erased event", () => {
  it("goes to the queue when the erasure completes and reaches the app push service, signed, without the cron job, once the pushes claimed before it are over", async () => {
    const caller = await newCaller();
    const victim = uniqueId("shopper");
    await appUserWithData(caller, victim);
    const erasure = await erase(victim);
    expect(erasure.event.event_id.slice(15, 18)).toBe(SHARDS[0]!.tag.toString(16).padStart(3, "0"));

    // Held for a claim's length (3 × PUSH_TIMEOUT_SECONDS, 30 s here as deployed) after its event_id's time.
    const [push] = await waitForPushes(erasure.event.event_id, 1, 50_000);
    expect(Number(push!.headers["webhook-timestamp"]) * 1000).toBeGreaterThanOrEqual(timeOfId(erasure.event.event_id) + 29_000);
    const body = (await expectSignedPush(push!)) as unknown as AppUserErasedEvent;
    expect(body).toEqual({ ...erasure.event, app_user_id: victim, receipts: erasure.receipts_erased });
    expect(body).toMatchObject({ type: "app_user.erased", app_user_id: victim });
  }, 60_000);

  it("a re-run erases 0, clears a dead-lettered and a delivered earlier app_user.erased, and keeps only its own", async () => {
    const caller = await newCaller();
    const victim = uniqueId("shopper");
    await appUserWithData(caller, victim);
    const first = await erase(victim);
    await deadLetter(first.event.event_id);
    const second = await erase(victim);
    await rowsOnEveryShard("UPDATE notice_outbox SET delivered_at = ?2 WHERE event_id = ?1", second.event.event_id, new Date().toISOString());
    expect(await erasedEventsNaming(victim)).toEqual([{ event_id: second.event.event_id, where: "notice_outbox" }]);

    const third = await erase(victim);

    expect(third.receipts_erased).toBe(0);
    expect(third.event).toMatchObject({ type: "app_user.erased", receipts: 0 });
    expect(third.event).not.toHaveProperty("app_user_id");
    expect(await erasedEventsNaming(victim)).toEqual([{ event_id: third.event.event_id, where: "notice_outbox" }]);
  });

  // What becomes of an earlier erasure's event that waited for its push when a later one swept its shard.
  const settle = {
    "dead-lettered": (eventId: string) => consumeDeadLetter(dbOf(eventId), eventId, new Date(), 0),
    delivered: (eventId: string) => settleEvents(dbOf(eventId), { delivered: [eventId], erasures: [eventId], failed: [] }, new Date()),
  };

  it.each(Object.keys(settle) as (keyof typeof settle)[])(
    "an earlier erasure's event %s after a later erasure swept its shard, before that erasure's record, goes with the record",
    async (outcome) => {
      const settledBeforeRecord = (first: Erasure) => async <T,>(name: string, work: () => Promise<T>) => {
        if (name === "record and send") await settle[outcome](first.event.event_id);
        return work();
      };

      const { victim, second } = await erasedTwice(settledBeforeRecord);

      expect(await erasedEventsNaming(victim)).toEqual([{ event_id: second.event.event_id, where: "notice_outbox" }]);
    },
  );

  /** An app user with a receipt, erased; then, with `steps`, erased again. */
  async function erasedTwice(steps?: (first: Erasure) => StepRunner): Promise<{ victim: string; first: Erasure; second: Erasure }> {
    const victim = uniqueId("shopper");
    await seedReceipt((await newCaller()).client, { app_user_id: victim });
    const first = await eraseAppUser(victim, erasureShards(), HASH_KEY);
    const second = await eraseAppUser(victim, erasureShards(), HASH_KEY, { steps: steps?.(first) });
    return { victim, first, second };
  }

  it("an earlier erasure's event dead-lettered after a later erasure completed is removed, not kept as failed; the latest one's is kept for a replay", async () => {
    const { victim, first, second } = await erasedTwice();
    expect(await erasedEventsNaming(victim)).toHaveLength(2);

    expect(await settle["dead-lettered"](first.event.event_id)).toBe("erased");
    expect(await settle["dead-lettered"](second.event.event_id)).toBe("failed");

    expect(await erasedEventsNaming(victim)).toEqual([{ event_id: second.event.event_id, where: "failed_notices" }]);
  });

  it("an earlier erasure's event delivered after a later erasure completed leaves the outbox; the latest one's stays for the event feed", async () => {
    const { victim, first, second } = await erasedTwice();

    await settle.delivered(first.event.event_id);
    await settle.delivered(second.event.event_id);

    expect(await erasedEventsNaming(victim)).toEqual([{ event_id: second.event.event_id, where: "notice_outbox" }]);
  });

  it("an erasure again while the first one's event waits for its push leaves that event to go out: the app is told of both, each signed with its own instant and count", async () => {
    const caller = await newCaller();
    const victim = uniqueId("shopper");
    await seedReceipt(caller.client, { app_user_id: victim });
    const first = await erase(victim);
    // The first event is held a claim's length (30 s) after its event_id's time: the second erasure runs meanwhile.
    const second = await erase(victim);
    expect([first.receipts_erased, second.receipts_erased]).toEqual([1, 0]);

    for (const erasure of [first, second]) {
      const [push] = await waitForPushes(erasure.event.event_id, 1, 80_000);
      expect(await expectSignedPush(push!)).toEqual({ ...erasure.event, app_user_id: victim });
    }
    // The notifier's record of the first one's delivery takes it: the second erasure had completed.
    await waitForDelivery(second.event.event_id);
    await vi.waitFor(async () => expect(await erasedEventsNaming(victim)).toEqual([{ event_id: second.event.event_id, where: "notice_outbox" }]), {
      timeout: 10_000,
      interval: 50,
    });
  }, 120_000);

  it("two erasures of one app user at once both complete; nothing of theirs survives, each receipt is counted once", async () => {
    const caller = await newCaller();
    const victim = uniqueId("shopper");
    const held = await appUserWithData(caller, victim);
    const [a, b] = await Promise.all([erase(victim), erase(victim)]);
    expect(a!.receipts_erased + b!.receipts_erased).toBe(held.length);
    expect(await tracesOf(victim)).toEqual(NO_TRACES);
    const events = await erasedEventsNaming(victim);
    expect(events.length).toBeGreaterThanOrEqual(1);
    expect(events.map((event) => event.event_id)).toContain(a!.event.occurred_at >= b!.event.occurred_at ? a!.event.event_id : b!.event.event_id);
  });
});

/** The shards as the erasure takes them straight through D1; `batches` records each batch run. */
function erasureShards(batches: { statements: number; erased: number }[] = []): JobShard[] {
  return SHARDS.map((shard) => ({
    ...shard,
    run: async (statements) => {
      const results = await runBatch(shard.db, statements);
      const receipts = results.find((result, index) => /^DELETE FROM receipts/.test(statements[index]!.sql.trim()));
      batches.push({ statements: statements.length, erased: receipts?.results.length ?? 0 });
      return results.map(({ results: rows }) => rows);
    },
  }));
}

describe("docs/api.md#erasure the Workflow never holds the app_user_id", () => {
  it("the instance starts with a request's ID, its output names no app user, and the request leaves with the event's record", async () => {
    const caller = await newCaller();
    const victim = uniqueId("shopper");
    await appUserWithData(caller, victim);
    const id = uniqueId("erasure");
    const first = [...SHARDS].sort((a, b) => a.name.localeCompare(b.name))[0]!;
    await using instance = await introspectWorkflowInstance(env.ERASURE, id);
    await instance.modify((m) => m.disableRetryDelays());
    await startErasure(env, victim, id);
    await instance.waitForStatus("complete");
    const output = await instance.getOutput();
    expect(JSON.stringify(output)).not.toContain(victim);
    expect(await first.db.prepare("SELECT 1 FROM erasure_requests WHERE app_user_id = ?").bind(victim).first()).toBeNull();
    expect(await tracesOf(victim)).toEqual(NO_TRACES);
  });

  it("an erasure takes with its request every earlier one of its app user (an instance that failed and was started again), never a later one", async () => {
    const caller = await newCaller();
    const victim = uniqueId("shopper");
    await appUserWithData(caller, victim);
    const first = [...SHARDS].sort((a, b) => a.name.localeCompare(b.name))[0]!;
    const failed = await requestErasure(env, victim);
    const id = uniqueId("erasure");
    await using instance = await introspectWorkflowInstance(env.ERASURE, id);
    await instance.modify((m) => m.disableRetryDelays());
    await startErasure(env, victim, id);
    const later = await requestErasure(env, victim);
    await instance.waitForStatus("complete");
    const left = await first.db.prepare("SELECT request_id FROM erasure_requests WHERE app_user_id = ?").bind(victim).all();
    expect(left.results).toEqual([{ request_id: later }]);
    expect(failed).not.toBe(later);
  });

  it("an erasure leaves an earlier request whose instance still runs: that instance completes after it", async () => {
    const caller = await newCaller();
    const victim = uniqueId("shopper");
    await appUserWithData(caller, victim);
    const first = [...SHARDS].sort((a, b) => a.name.localeCompare(b.name))[0]!;
    const earlierId = uniqueId("erasure");
    await using earlier = await introspectWorkflowInstance(env.ERASURE, earlierId);
    await earlier.modify((m) => m.disableRetryDelays());
    await startErasure(env, victim, earlierId);
    const held = await env.ERASURE.get(earlierId);
    await held.pause();
    await erase(victim);
    expect(await first.db.prepare("SELECT request_id FROM erasure_requests WHERE app_user_id = ?").bind(victim).all()).toMatchObject({ results: [{ request_id: earlierId }] });
    await held.resume();
    await earlier.waitForStatus("complete");
    expect(await first.db.prepare("SELECT 1 FROM erasure_requests WHERE app_user_id = ?").bind(victim).first()).toBeNull();
    expect(await tracesOf(victim)).toEqual(NO_TRACES);
  });

  it("an instance whose request is gone runs no step and fails, with an error log line that names why", async () => {
    const id = uniqueId("erasure");
    const lines = await consoleLines(async () => {
      await using instance = await introspectWorkflowInstance(env.ERASURE, id);
      await instance.modify((m) => m.disableRetryDelays());
      await env.ERASURE.create({ id, params: { request_id: crypto.randomUUID() } });
      await instance.waitForStatus("errored");
    });
    expect(lines.some((line) => line.includes('"event":"job"') && line.includes(id) && line.includes("request is gone"))).toBe(true);
  });
});
