/**
 * Receipts over several D1 databases (docs/api.md#shards), on the three shards of the test run:
 * placement, delete on every shard, idempotency across a close and a new shard, closed shards,
 * racing deletes, the cron job and the notifier on every shard, and the fill check.
 */
import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it } from "vitest";
import { runScheduledJobs } from "../../src/api/scheduled.ts";
import { shardStateKey, tagOfId, type ShardState } from "../../src/shared/shard-ids.ts";
import { placeReceipt } from "../../src/storage/placement.ts";
import { shardOfId, type Shard } from "../../src/storage/shards.ts";
import { IDEMPOTENCY_WINDOW_MS } from "../../src/storage/receipts.ts";
import { PATHS } from "../../src/shared/paths.ts";
import { call, consoleLines, newCaller, postAdd, uniqueId, validReceiptBody, type Answer, type Caller } from "../support/api.ts";
import {
  deleteHeadersFor,
  expectSignedPush,
  outboxRows,
  receiptExists,
  seedReceipt,
  waitForDelivery,
  waitForPushes,
} from "../support/notices.ts";
import { SHARDS, idOn, receiptsOf } from "../support/shards.ts";

/** Sets a shard's state as `npm run shards -- close|open` does; the test run rereads states on every request. */
async function setState(shard: Shard, state: ShardState["state"], changedAgoMs = 0): Promise<void> {
  const record: ShardState = { state, changed_at: new Date(Date.now() - changedAgoMs).toISOString(), by: "operator" };
  await env.SHARD_STATES.put(shardStateKey(shard.name), JSON.stringify(record));
}

afterEach(async () => {
  await Promise.all(SHARDS.map((shard) => env.SHARD_STATES.delete(shardStateKey(shard.name))));
});

const LONG_AGO = 2 * IDEMPOTENCY_WINDOW_MS;

function shardNameOf(receiptId: string): string | undefined {
  return shardOfId(SHARDS, receiptId)?.name;
}

async function addMany(caller: Caller, count: number, extra: Record<string, string> = {}): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < count; i += 1) {
    const answer = await postAdd({ ...caller.headers, ...extra });
    expect(answer.status).toBe(200);
    ids.push(answer.body.data.receipt_id);
  }
  return ids;
}

describe("docs/api.md#shards placement", () => {
  it("the suite runs on three shards, each with its own tag", () => {
    expect(SHARDS.map((shard) => shard.name)).toEqual(["s1", "s2", "s3"]);
    expect(new Set(SHARDS.map((shard) => shard.tag)).size).toBe(3);
  });

  it("receipts spread over the open shards, each stored on the shard its receipt_id names", async () => {
    const caller = await newCaller();
    const ids = await addMany(caller, 45);
    const names = new Set(ids.map(shardNameOf));
    expect(names).toEqual(new Set(["s1", "s2", "s3"]));
    for (const id of ids) {
      expect(tagOfId(id)).toBe(shardOfId(SHARDS, id)!.tag);
      expect(await receiptExists(id)).toBe(true);
    }
    expect(await receiptsOf(caller.client.clientId)).toBe(45);
  });

  it("a receipt_id that names no shard is no receipt: 406, nothing deleted", async () => {
    const caller = await newCaller();
    const receipt = await seedReceipt(caller.client);
    const unknownTag = `${receipt.receipt_id.slice(0, 15)}fff${receipt.receipt_id.slice(18)}`;
    expect(SHARDS.some((shard) => shard.tag === 0xfff)).toBe(false);
    const answer = await call(PATHS.delete, { headers: { ...deleteHeadersFor(caller.token, receipt), receipt_id: unknownTag } });
    expect(answer.status).toBe(406);
    expect(answer.body.message).toContain("no receipt exists");
    expect(await receiptExists(receipt.receipt_id)).toBe(true);
  });
});

describe("docs/api.md#shards delete on every shard", () => {
  it.each(["s1", "s2", "s3"])("a receipt on %s is deleted and its signed notice delivered", async (name) => {
    const shard = SHARDS.find((candidate) => candidate.name === name)!;
    const caller = await newCaller();
    const receipt = await seedReceipt(caller.client, { receipt_id: idOn(shard) });
    expect((await call(PATHS.delete, { headers: deleteHeadersFor(caller.token, receipt) })).status).toBe(200);
    expect(await receiptExists(receipt.receipt_id)).toBe(false);
    const [push] = await waitForPushes(receipt.receipt_id);
    const notice = await expectSignedPush(push!);
    expect(shardNameOf(notice.event_id)).toBe(name);
    await waitForDelivery(receipt.receipt_id);
  });

  it.each(["s1", "s2", "s3"])("two deletes racing on %s: one 200, one 406, exactly one notice", async (name) => {
    const shard = SHARDS.find((candidate) => candidate.name === name)!;
    const caller = await newCaller();
    const receipt = await seedReceipt(caller.client, { receipt_id: idOn(shard) });
    const answers = await Promise.all([1, 2].map(() => call(PATHS.delete, { headers: deleteHeadersFor(caller.token, receipt) })));
    expect(answers.map((answer) => answer.status).sort()).toEqual([200, 406]);
    expect(await outboxRows(receipt.receipt_id)).toHaveLength(1);
  });
});

describe("docs/api.md#shards closed shards", () => {
  it("a closed shard takes no new receipt, yet serves delete", async () => {
    const [closed] = SHARDS;
    const caller = await newCaller();
    const old = await seedReceipt(caller.client, { receipt_id: idOn(closed) });
    await setState(closed!, "closed");
    const ids = await addMany(caller, 24);
    expect(ids.map(shardNameOf)).not.toContain(closed!.name);
    expect((await call(PATHS.delete, { headers: deleteHeadersFor(caller.token, old) })).status).toBe(200);
  });

  it("with every shard closed, a new add gets 503 with Retry-After and an alert line, and stores nothing", async () => {
    const caller = await newCaller();
    for (const shard of SHARDS) await setState(shard, "closed");
    let answer: Answer | undefined;
    const lines = await consoleLines(async () => {
      answer = await postAdd({ ...caller.headers, "Idempotency-Key": uniqueId("key") });
    });
    expect(answer!.status).toBe(503);
    expect(answer!.headers.get("retry-after")).toBe("60");
    expect(answer!.body).toMatchObject({ status: "Service Unavailable", status_code: 503 });
    expect(answer!.body.message).toMatch(/^The service takes no new receipts now; send the same request again after Retry-After seconds\. See /);
    const logged = lines.map((line) => JSON.parse(line) as Record<string, unknown>);
    expect(logged).toContainEqual(expect.objectContaining({ level: "error", event: "no-open-shard" }));
    expect(await receiptsOf(caller.client.clientId)).toBe(0);
  });

  it("with every shard closed, a keyed retry of an add that succeeded gets its first answer, and a new key a 503", async () => {
    const caller = await newCaller();
    const headers = { ...caller.headers, "Idempotency-Key": uniqueId("key") };
    const first = await postAdd(headers);
    expect(first.status).toBe(200);
    for (const shard of SHARDS) await setState(shard, "closed");

    const retry = await postAdd(headers);
    expect(retry.status).toBe(200);
    expect(retry.body).toEqual(first.body);
    const conflict = await postAdd({ ...headers, app_user_id: uniqueId("au") });
    expect(conflict.status).toBe(409);
    expect((await postAdd({ ...headers, "Idempotency-Key": uniqueId("key") })).status).toBe(503);
    expect(await receiptsOf(caller.client.clientId)).toBe(1);
  });
});

describe("docs/api.md#shards idempotency across shard changes", () => {
  it("a replay after the first call's shard closed gets the first answer and stores nothing", async () => {
    const caller = await newCaller();
    const keyed = { ...caller.headers, "Idempotency-Key": uniqueId("key") };
    const first = await postAdd(keyed);
    expect(first.status).toBe(200);
    const shard = shardOfId(SHARDS, first.body.data.receipt_id)!;
    await setState(shard, "closed");
    const replay = await postAdd(keyed);
    expect(replay.status).toBe(200);
    expect(replay.body).toEqual(first.body);
    expect(await receiptsOf(caller.client.clientId)).toBe(1);
    // A different body under the key is still a conflict, though its record is on a closed shard.
    const conflict = await postAdd(keyed, { ...validReceiptBody(), store_id: "another" });
    expect(conflict.status).toBe(409);
  });

  it("a replay after a new shard opened, which the key now ranks first, gets the first answer", async () => {
    const caller = await newCaller();
    // A key whose rendezvous order puts some shard first: call it the new one, closed at first.
    const key = uniqueId("key");
    const ranked = placeReceipt(SHARDS, new Map(), { key, now: Date.now(), failing: new Set() })!.target;
    await setState(ranked, "closed", LONG_AGO);
    const keyed = { ...caller.headers, "Idempotency-Key": key };
    const first = await postAdd(keyed);
    expect(first.status).toBe(200);
    expect(shardNameOf(first.body.data.receipt_id)).not.toBe(ranked.name);

    await setState(ranked, "open");
    const replay = await postAdd(keyed);
    expect(replay.body).toEqual(first.body);
    expect(await receiptsOf(caller.client.clientId)).toBe(1);
    // A new key that ranks the new shard first goes there.
    const fresh = await postAdd({ ...caller.headers, "Idempotency-Key": key + "-2" });
    expect(fresh.status).toBe(200);
  });

  it("20 racing first calls with one key across shard changes store one receipt", async () => {
    const caller = await newCaller();
    const keyed = { ...caller.headers, "Idempotency-Key": uniqueId("key") };
    const answers = await Promise.all(Array.from({ length: 20 }, () => postAdd(keyed)));
    expect(new Set(answers.map((answer) => answer.body.data.receipt_id)).size).toBe(1);
    expect(await receiptsOf(caller.client.clientId)).toBe(1);
  });
});

describe("docs/api.md#shards cron jobs and notifier on every shard", () => {
  it("the cron job runs every job on every shard, each logged with its shard", async () => {
    const lines = await consoleLines(() => runScheduledJobs(env, new Date()));
    const runs = lines.map((line) => JSON.parse(line) as Record<string, unknown>).filter((line) => line.event === "scheduled");
    for (const shard of SHARDS) {
      expect(runs.filter((line) => line.shard === shard.name).map((line) => line.job).sort()).toEqual([
        "app-user-jobs.purge-expired",
        "archive-tombstones.purge-lines",
        "archive-tombstones.purge-old",
        "audit.purge-expired",
        "erasure-fences.purge",
        "idempotency-keys.delete-expired",
        "notices.purge-delivered",
        "notices.resend",
      ]);
    }
    expect(runs.every((line) => line.level === "info")).toBe(true);
  });
});
