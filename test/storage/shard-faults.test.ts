/**
 * Faults of one shard (docs/api.md#shards, "Faults"): D1's transient errors retried so that the
 * answer stays true, and a shard whose calls keep failing affecting only what it holds.
 */
import { createExecutionContext, waitOnExecutionContext } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { beforeEach, describe, expect, it } from "vitest";
import { createApp } from "../../src/api/app.ts";
import { PATHS } from "../../src/shared/paths.ts";
import { shardOfId, type Shard } from "../../src/storage/shards.ts";
import { BASE, consoleLines, expectErrorShape, newCaller, uniqueId, validReceiptBody, type Answer } from "../support/api.ts";
import { deleteHeadersFor, outboxRows, receiptExists, seedReceipt } from "../support/notices.ts";
import { SHARDS, failingWith, idOn, receiptsOf } from "../support/shards.ts";

const TRANSIENT = "D1_ERROR: Network connection lost.";

// Each test's own app: the shards it finds failing are remembered across the test's calls only.
let app = createApp();
beforeEach(() => {
  app = createApp();
});

/** Calls the test's app with its shard bindings replaced as given. */
async function callWith(shards: Record<string, D1Database>, path: string, headers: Record<string, string>, body?: string): Promise<Answer> {
  const ctx = createExecutionContext();
  const response = await app.fetch(new Request(BASE + path, { method: "POST", headers, body }), { ...env, ...shards }, ctx);
  const answer = { status: response.status, headers: response.headers, body: await response.json() };
  await waitOnExecutionContext(ctx);
  return answer;
}

/** A database whose first batch commits and then reports the connection lost, as D1 can. */
function batchLostOnce(db: D1Database): D1Database {
  let lost = false;
  return new Proxy(db, {
    get(target, property) {
      if (property === "batch") {
        return async (statements: D1PreparedStatement[]) => {
          const results = await target.batch(statements);
          if (!lost) {
            lost = true;
            throw new Error(TRANSIENT);
          }
          return results;
        };
      }
      const value = Reflect.get(target, property, target);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
}

/** A database whose first statement run commits and then reports the connection lost. */
function runLostOnce(db: D1Database): D1Database {
  let lost = false;
  return new Proxy(db, {
    get(target, property) {
      if (property === "prepare") {
        return (sql: string) => {
          const statement = target.prepare(sql);
          const bind = statement.bind.bind(statement);
          statement.bind = (...values: unknown[]) => {
            const bound = bind(...values);
            const run = bound.run.bind(bound);
            bound.run = (async () => {
              const result = await run();
              if (!lost) {
                lost = true;
                throw new Error(TRANSIENT);
              }
              return result;
            }) as typeof bound.run;
            return bound;
          };
          return statement;
        };
      }
      const value = Reflect.get(target, property, target);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
}

/** A database every call of which fails, as a shard that is down. */
function down(db: D1Database): D1Database {
  return failingWith(db, "D1_ERROR: D1 DB is unavailable");
}

describe("docs/api.md#shards transient D1 errors: retried, and the answer stays true", () => {
  it.each(SHARDS.map((shard) => [shard.name, shard] as const))(
    "a delete on %s whose first attempt committed still answers 200, with one notice",
    async (_name, shard: Shard) => {
      const caller = await newCaller();
      const receipt = await seedReceipt(caller.client, { receipt_id: idOn(shard) });
      const answer = await callWith({ [shard.binding]: batchLostOnce(shard.db) }, PATHS.delete, deleteHeadersFor(caller.token, receipt));
      expect(answer.status).toBe(200);
      expect(await receiptExists(receipt.receipt_id)).toBe(false);
      expect(await outboxRows(receipt.receipt_id)).toHaveLength(1);
    },
  );

  it("a keyed add whose first attempt committed answers 200 once, and a replay gets the same answer", async () => {
    const caller = await newCaller();
    const headers = { ...caller.headers, "Idempotency-Key": uniqueId("key") };
    const flaky = Object.fromEntries(SHARDS.map((shard) => [shard.binding, batchLostOnce(shard.db)]));
    const first = await callWith(flaky, PATHS.add, headers, JSON.stringify(validReceiptBody()));
    expect(first.status).toBe(200);
    const replay = await callWith({}, PATHS.add, headers, JSON.stringify(validReceiptBody()));
    expect(replay.body).toEqual(first.body);
    expect(await receiptsOf(caller.client.clientId)).toBe(1);
  });

  it("an add without a key whose first attempt committed answers 200 and stores one receipt", async () => {
    const caller = await newCaller();
    const flaky = Object.fromEntries(SHARDS.map((shard) => [shard.binding, runLostOnce(shard.db)]));
    const answer = await callWith(flaky, PATHS.add, caller.headers, JSON.stringify(validReceiptBody()));
    expect(answer.status).toBe(200);
    expect(await receiptsOf(caller.client.clientId)).toBe(1);
    expect(await receiptExists(answer.body.data.receipt_id)).toBe(true);
  });
});

describe("docs/api.md#shards a failing shard affects only what it holds", () => {
  it("adds go on elsewhere, deletes on other shards succeed, only the failing shard's receipts are refused", async () => {
    const [failing, ...healthy] = SHARDS;
    const caller = await newCaller();
    const onFailing = await seedReceipt(caller.client, { receipt_id: idOn(failing) });
    const onHealthy = await Promise.all(healthy.map((shard) => seedReceipt(caller.client, { receipt_id: idOn(shard) })));
    const broken = { [failing!.binding]: down(failing!.db) };

    // Adds until one has met the failing shard (a random open shard each time), then 20 more.
    const statuses: number[] = [];
    for (let i = 0; i < 40 && !statuses.includes(500); i += 1) {
      statuses.push((await callWith(broken, PATHS.add, caller.headers, JSON.stringify(validReceiptBody()))).status);
    }
    expect(statuses.filter((status) => status === 500)).toHaveLength(1);
    for (let i = 0; i < 20; i += 1) {
      const answer = await callWith(broken, PATHS.add, caller.headers, JSON.stringify(validReceiptBody()));
      expect(answer.status).toBe(200);
      expect(shardOfId(SHARDS, answer.body.data.receipt_id)).not.toBe(failing);
    }

    for (const receipt of onHealthy) {
      expect((await callWith(broken, PATHS.delete, deleteHeadersFor(caller.token, receipt))).status).toBe(200);
    }
    const refused = await callWith(broken, PATHS.delete, deleteHeadersFor(caller.token, onFailing));
    expect(refused.status).toBe(500);
    expect(refused.body.message).not.toMatch(/D1|DB_|unavailable/);
    expect(await receiptExists(onFailing.receipt_id)).toBe(true);
  });
});

const OVERLOAD_ERRORS = [
  "D1_ERROR: D1 DB is overloaded. Requests queued for too long.",
  "D1_ERROR: D1 DB is overloaded. Too many requests queued.",
  "D1_ERROR: SQLITE_BUSY: database is locked",
];

describe("docs/api.md#limits an overloaded shard answers 503 with Retry-After, never 500", () => {
  it.each(OVERLOAD_ERRORS)("a keyed add whose shard answers %s: 503, an error line naming the shard, nothing stored; the retry stores once", async (message) => {
    const caller = await newCaller();
    const headers = { ...caller.headers, "Idempotency-Key": uniqueId("key") };
    const body = JSON.stringify(validReceiptBody());
    const busy = Object.fromEntries(SHARDS.map((shard) => [shard.binding, failingWith(shard.db, message)]));
    let answer: Answer | undefined;
    const lines = await consoleLines(async () => {
      answer = await callWith(busy, PATHS.add, headers, body);
    });
    expectErrorShape(answer!, 503, "Service Unavailable");
    expect(answer!.headers.get("retry-after")).toBe("5");
    expect(answer!.body.message).not.toMatch(/D1|SQLITE|DB_/);
    const logged = lines.map((line) => JSON.parse(line) as Record<string, unknown>);
    const alert = logged.find((line) => line.event === "shard-overloaded");
    expect(alert).toMatchObject({ level: "error", route: "add" });
    expect(SHARDS.map((shard) => shard.name)).toContain(alert!.shard);
    expect(await receiptsOf(caller.client.clientId)).toBe(0);

    const retry = await callWith({}, PATHS.add, headers, body);
    expect(retry.status).toBe(200);
    expect(await receiptsOf(caller.client.clientId)).toBe(1);
  });

  it("an add without a key while one shard is overloaded: 503 once, then the isolate's adds go to the other shards", async () => {
    const [busyShard] = SHARDS;
    const caller = await newCaller();
    const busy = { [busyShard!.binding]: failingWith(busyShard!.db, OVERLOAD_ERRORS[0]!) };
    const statuses: number[] = [];
    for (let i = 0; i < 40 && !statuses.includes(503); i += 1) {
      statuses.push((await callWith(busy, PATHS.add, caller.headers, JSON.stringify(validReceiptBody()))).status);
    }
    expect(statuses.filter((status) => status === 503)).toHaveLength(1);
    expect(statuses.filter((status) => status !== 200 && status !== 503)).toEqual([]);
    for (let i = 0; i < 10; i += 1) {
      const answer = await callWith(busy, PATHS.add, caller.headers, JSON.stringify(validReceiptBody()));
      expect(answer.status).toBe(200);
      expect(shardOfId(SHARDS, answer.body.data.receipt_id)).not.toBe(busyShard);
    }
  });

  it("a delete whose shard is overloaded: 503 with Retry-After, the receipt and its outbox untouched; the retry deletes it", async () => {
    const caller = await newCaller();
    const receipt = await seedReceipt(caller.client);
    const shard = shardOfId(SHARDS, receipt.receipt_id)!;
    const answer = await callWith({ [shard.binding]: failingWith(shard.db, OVERLOAD_ERRORS[1]!) }, PATHS.delete, deleteHeadersFor(caller.token, receipt));
    expectErrorShape(answer, 503, "Service Unavailable");
    expect(answer.headers.get("retry-after")).toBe("5");
    expect(await receiptExists(receipt.receipt_id)).toBe(true);
    expect(await outboxRows(receipt.receipt_id)).toHaveLength(0);
    expect((await callWith({}, PATHS.delete, deleteHeadersFor(caller.token, receipt))).status).toBe(200);
  });
});
