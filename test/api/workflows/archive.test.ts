/**
 * docs/storage.md "Archive": the archive's move (src/api/workflows/archive-workflow.ts and
 * src/storage/archive/move.ts) on the test run's shards and the local R2 bucket. The test run has
 * ARCHIVE_AFTER_DAYS = 0 (vitest.config.ts): every receipt is old enough at the next run. Storage
 * is per file, and each test asserts only on its own receipts, since a move takes every receipt
 * of its shard.
 */
import { env } from "cloudflare:workers";
import { introspectWorkflow, introspectWorkflowInstance, type WorkflowInstanceModifier } from "cloudflare:test";
import { v7 as uuidv7 } from "uuid";
import { describe, expect, it } from "vitest";
import { dailyArchiveId, nextPartId } from "../../../src/api/workflows/archive-workflow.ts";
import { startDailyArchives, startsArchives } from "../../../src/api/scheduled.ts";
import { parseAuditHashKey } from "../../../src/shared/audit-hash-key.ts";
import { PATHS } from "../../../src/shared/paths.ts";
import {
  archiveCutoff,
  archiveDueAt,
  archiveObjectKey,
  archivedReceipts,
  archiveText,
  archiveUserPrefix,
  type ArchivedReceipt,
} from "../../../src/storage/archive/layout.ts";
import { ARCHIVE_PAGE, archiveShard, type ArchiveRun } from "../../../src/storage/archive/move.ts";
import type { JobShard } from "../../../src/storage/steps.ts";
import { readObject, type ArchiveBucket } from "../../../src/storage/archive/objects.ts";
import { pseudonym } from "../../../src/storage/erasure.ts";
import { writeFence } from "../../../src/storage/fences.ts";
import { idOnShard, type Shard } from "../../../src/storage/shards.ts";
import { bound, runBatch } from "../../../src/storage/statement.ts";
import { call, consoleLines, newCaller, uniqueId } from "../../support/api.ts";
import { tombstoneOf } from "../../support/archive.ts";
import { TEST_AUDIT_HASH_KEY } from "../../support/keys.ts";
import { SHARDS } from "../../support/shards.ts";
import { testUserKey } from "../../support/user-keys.ts";

const HASH_KEY = parseAuditHashKey(TEST_AUDIT_HASH_KEY);
const DAY_MS = 24 * 60 * 60 * 1000;

/** Receipts put straight into a shard, made at the given times, as add stores them. */
async function seed(shard: Shard, specs: { app_user_id: string; chain_id: string; at: number }[]): Promise<ArchivedReceipt[]> {
  const receipts = specs.map(({ app_user_id, chain_id, at }) => ({
    receipt_id: idOnShard(uuidv7({ msecs: at }), shard),
    chain_id,
    client_id: "pos-archive",
    app_user_id,
    created_at: new Date(at).toISOString(),
    body: JSON.stringify({ total: at % 1000, note: `receipt of ${app_user_id}` }),
  }));
  const insert = "INSERT INTO receipts (receipt_id, chain_id, client_id, app_user_id, body, created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)";
  for (let start = 0; start < receipts.length; start += 50) {
    await shard.db.batch(
      receipts.slice(start, start + 50).map((r) => shard.db.prepare(insert).bind(r.receipt_id, r.chain_id, r.client_id, r.app_user_id, r.body, r.created_at)),
    );
  }
  return receipts;
}

/** Receipts of `users` over three chains and the three months before now, `each` per user, chain and month. */
function spread(users: readonly string[], each: number): { app_user_id: string; chain_id: string; at: number }[] {
  const now = Date.now();
  return users.flatMap((app_user_id) =>
    ["chain-a", "chain-b", "chain-c"].flatMap((chain_id) =>
      [70, 40, 10].flatMap((daysAgo) => Array.from({ length: each }, (_, i) => ({ app_user_id, chain_id, at: now - daysAgo * DAY_MS + i * 1000 }))),
    ),
  );
}

/** The shard as the move sees it, its batches run on its binding. */
function archiveShardOf(shard: Shard): JobShard {
  return { ...shard, run: async (statements) => (await runBatch(shard.db, statements)).map(({ results }) => results) };
}

/** Every archived object under one app user's prefix, by key, as text. */
async function objectsOf(appUserId: string): Promise<Map<string, string>> {
  const texts = new Map<string, string>();
  let cursor: string | undefined;
  do {
    const listed = await env.ARCHIVE.list({ prefix: archiveUserPrefix(await testUserKey(appUserId)), cursor });
    for (const { key } of listed.objects) texts.set(key, (await readObject(env.ARCHIVE, key)).text);
    cursor = listed.truncated ? listed.cursor : undefined;
  } while (cursor);
  return texts;
}

/** Where each receipt is: how many lines of the archive hold it, and whether its row is still in D1. */
async function whereaboutsOf(receipts: readonly ArchivedReceipt[]): Promise<Map<string, { lines: number; row: boolean }>> {
  const lines = new Map<string, number>();
  for (const user of new Set(receipts.map((r) => r.app_user_id))) {
    for (const text of (await objectsOf(user)).values()) {
      for (const { receipt_id } of archivedReceipts(text)) lines.set(receipt_id, (lines.get(receipt_id) ?? 0) + 1);
    }
  }
  const found = new Map<string, { lines: number; row: boolean }>();
  for (const receipt of receipts) {
    const shard = SHARDS.find((s) => s.name === shardNameOf(receipt))!;
    const row = await shard.db.prepare("SELECT 1 FROM receipts WHERE receipt_id = ?1").bind(receipt.receipt_id).first();
    found.set(receipt.receipt_id, { lines: lines.get(receipt.receipt_id) ?? 0, row: row !== null });
  }
  return found;
}

function shardNameOf(receipt: ArchivedReceipt): string {
  return SHARDS.find((shard) => idOnShard(receipt.receipt_id, shard) === receipt.receipt_id)!.name;
}

/** Runs the Workflow for a shard to its end and returns its output. */
async function runWorkflow(shard: Shard, modify?: (m: WorkflowInstanceModifier) => Promise<void>): Promise<ArchiveRun> {
  const id = uniqueId("archive");
  await using instance = await introspectWorkflowInstance(env.ARCHIVING, id);
  await instance.modify(async (m) => {
    await m.disableRetryDelays();
    await modify?.(m);
  });
  await env.ARCHIVING.create({ id, params: { shard: shard.name } });
  await instance.waitForStatus("complete");
  return (await instance.getOutput()) as ArchiveRun;
}

/** The expected objects of some receipts on one shard: key → text, as the layout writes them. */
async function expectedObjects(receipts: readonly ArchivedReceipt[], shard: Shard): Promise<Map<string, string>> {
  const groups = new Map<string, ArchivedReceipt[]>();
  for (const r of receipts) {
    const key = archiveObjectKey(await testUserKey(r.app_user_id), r.chain_id, r.receipt_id, shard.name);
    groups.set(key, [...(groups.get(key) ?? []), r]);
  }
  return new Map([...groups].map(([key, group]) => [key, archiveText(group)]));
}

async function objectsOfUsers(users: readonly string[]): Promise<Map<string, string>> {
  const all = new Map<string, string>();
  for (const user of users) for (const [key, text] of await objectsOf(user)) all.set(key, text);
  return all;
}

describe("docs/storage.md#archive moves receipts past the archive age from their shard to R2", () => {
  it("moves receipts of several app users, chains and months over several pages: each receipt once, in its user's, chain's and month's object, its row gone", async () => {
    const shard = SHARDS[0]!;
    const users = [uniqueId("au"), uniqueId("au"), uniqueId("au"), uniqueId("au(x/y)")];
    const receipts = await seed(shard, spread(users, 20));
    expect(receipts.length).toBeGreaterThan(2 * ARCHIVE_PAGE);
    const elsewhere = await seed(SHARDS[1]!, spread([users[0]!], 1));

    const run = await runWorkflow(shard);
    expect(run).toMatchObject({ shard: shard.name, complete: true });
    expect(run.receipts).toBeGreaterThanOrEqual(receipts.length);
    expect(run.pages).toBeGreaterThan(2);

    const archived = await objectsOfUsers(users);
    const expected = await expectedObjects(receipts, shard);
    expect(new Map([...archived].filter(([key]) => key.endsWith(`/${shard.name}.ndjson`)))).toEqual(expected);
    expect(expected.size).toBe(users.length * 3 * 3);
    for (const { lines, row } of (await whereaboutsOf(receipts)).values()) expect({ lines, row }).toEqual({ lines: 1, row: false });
    // Another shard's receipts wait for that shard's run.
    for (const { lines, row } of (await whereaboutsOf(elsewhere)).values()) expect({ lines, row }).toEqual({ lines: 0, row: true });

    const [runRow] = (await shard.db.prepare("SELECT * FROM archive_runs WHERE run_id LIKE 'archive-%' ORDER BY started_at DESC LIMIT 1").all()).results;
    expect(runRow).toMatchObject({ receipts: run.receipts, bytes: run.bytes });
    expect(runRow!.finished_at).not.toBeNull();
  }, 60_000);

  it("docs/api.md#dr-retail a receipt added in DR Retail keeps its format and model in its line; one of our shape has neither", async () => {
    const shard = SHARDS[1]!;
    const user = uniqueId("au-dr");
    const madeAt = Date.now() - 50 * DAY_MS;
    const [ours, dr] = await seed(shard, [
      { app_user_id: user, chain_id: "chain-a", at: madeAt },
      { app_user_id: user, chain_id: "chain-a", at: madeAt + 1000 },
    ]);
    const mapped = JSON.stringify({ purchased_at: "2026-10-01T10:00:00+02:00", currency: "SEK", total: 100, line_items: [{ description: "x", quantity: 1, unit_price: 100, total: 100 }] });
    await shard.db.prepare("UPDATE receipts SET format = 'dr-retail/v1.1', mapped = ?2 WHERE receipt_id = ?1").bind(dr!.receipt_id, mapped).run();
    // A run once their month is wholly past the age.
    const now = () => archiveDueAt(new Date(madeAt + 1000), 45 * DAY_MS);
    await archiveShard(archiveShardOf(shard), env.ARCHIVE, HASH_KEY, { runId: uniqueId("run"), archiveAfterMs: 45 * DAY_MS, now });
    const lines = [...(await objectsOf(user)).values()].flatMap(archivedReceipts);
    expect(lines).toEqual([ours, { ...dr, format: "dr-retail/v1.1", mapped }]);
  });

  it("a second run changes nothing: the same bytes, no object written, nothing counted", async () => {
    const shard = SHARDS[1]!;
    const users = [uniqueId("au"), uniqueId("au")];
    await seed(shard, spread(users, 2));
    await runWorkflow(shard);
    const before = await objectsOfUsers(users);
    const etags = await Promise.all([...before.keys()].map(async (key) => (await env.ARCHIVE.head(key))!.etag));
    const again = await runWorkflow(shard);
    expect(again).toMatchObject({ receipts: 0, objects: 0, bytes: 0 });
    expect(await objectsOfUsers(users)).toEqual(before);
    expect(await Promise.all([...before.keys()].map(async (key) => (await env.ARCHIVE.head(key))!.etag))).toEqual(etags);
  });

  it("leaves a receipt whose event is not delivered yet (its push reads the body from the row) for a later run", async () => {
    const shard = SHARDS[0]!;
    const [waiting] = await seed(shard, [{ app_user_id: uniqueId("au"), chain_id: "c", at: Date.now() - 50 * DAY_MS }]);
    await shard.db.prepare(
      `INSERT INTO failed_notices (event_id, receipt_id, payload, created_at, failed_at, attempts, last_error)
       VALUES (?1, ?2, '{"type":"receipt.created"}', ?3, ?3, 11, 'HTTP 500')`,
    ).bind(idOnShard(uuidv7(), shard), waiting!.receipt_id, new Date().toISOString()).run();
    await archiveShard(archiveShardOf(shard), env.ARCHIVE, HASH_KEY, { runId: uniqueId("run"), archiveAfterMs: 0 });
    expect((await whereaboutsOf([waiting!])).get(waiting!.receipt_id)).toEqual({ lines: 0, row: true });
    await shard.db.prepare("DELETE FROM failed_notices WHERE receipt_id = ?1").bind(waiting!.receipt_id).run();
    await archiveShard(archiveShardOf(shard), env.ARCHIVE, HASH_KEY, { runId: uniqueId("run"), archiveAfterMs: 0 });
    expect((await whereaboutsOf([waiting!])).get(waiting!.receipt_id)).toEqual({ lines: 1, row: false });
  });

  it("a run that reaches its pages' limit says it is incomplete, and the next part, under the next ID, moves the rest", async () => {
    const shard = SHARDS[2]!;
    const receipts = await seed(shard, spread([uniqueId("au"), uniqueId("au")], 15));
    expect(receipts.length).toBeGreaterThan(ARCHIVE_PAGE);
    const first = await archiveShard(archiveShardOf(shard), env.ARCHIVE, HASH_KEY, { runId: uniqueId("run"), archiveAfterMs: 0, maxPages: 1 });
    expect(first).toMatchObject({ complete: false, pages: 1 });
    const second = await archiveShard(archiveShardOf(shard), env.ARCHIVE, HASH_KEY, { runId: uniqueId("run"), archiveAfterMs: 0 });
    expect(second.complete).toBe(true);
    for (const { lines, row } of (await whereaboutsOf(receipts)).values()) expect({ lines, row }).toEqual({ lines: 1, row: false });
    expect([nextPartId("archive-s1-2031-01-05", 0), nextPartId("archive-s1-2031-01-05-part-1", 1)]).toEqual([
      "archive-s1-2031-01-05-part-1",
      "archive-s1-2031-01-05-part-2",
    ]);
  });

  it("leaves receipts younger than the archive age, and those past it whose month is not yet wholly past it", async () => {
    const shard = SHARDS[2]!;
    const user = uniqueId("au");
    // Now less the age is 12:00 on 1 October: September is wholly past the age, October is not.
    const now = Date.UTC(2026, 10, 15, 12);
    const [old, young] = [await seed(shard, [{ app_user_id: user, chain_id: "c", at: now - 46 * DAY_MS }]), await seed(shard, [{ app_user_id: user, chain_id: "c", at: now - 44 * DAY_MS }])];
    const [waiting] = await seed(shard, [{ app_user_id: user, chain_id: "c", at: Date.UTC(2026, 9, 1, 6) }]);
    const run = await archiveShard(archiveShardOf(shard), env.ARCHIVE, HASH_KEY, { runId: uniqueId("run"), archiveAfterMs: 45 * DAY_MS, now: () => new Date(now) });
    expect(run.cutoff).toBe("2026-10-01T00:00:00.000Z");
    expect(await whereaboutsOf([...old!.values(), ...young!.values(), waiting!])).toEqual(
      new Map([
        [old![0]!.receipt_id, { lines: 1, row: false }],
        [young![0]!.receipt_id, { lines: 0, row: true }],
        [waiting!.receipt_id, { lines: 0, row: true }],
      ]),
    );
  });
});

describe("docs/storage.md#archive a month moves at once, once every receipt of it is past the archive age", () => {
  const AGE = 45 * DAY_MS;

  /** The bucket, counting puts on the keys under `prefixes`: the test's own objects, on a shard others' tests share. */
  function countingPuts(prefixes: readonly string[]): { bucket: ArchiveBucket; puts: string[] } {
    const puts: string[] = [];
    return {
      puts,
      bucket: {
        get: (key) => env.ARCHIVE.get(key),
        put: (key, value, options) => {
          if (prefixes.some((prefix) => key.startsWith(prefix))) puts.push(key);
          return env.ARCHIVE.put(key, value, options);
        },
      },
    };
  }

  it("receipts of a month still in progress past the age stay; the first run after the month is wholly past the age moves them all, one put per object", async () => {
    const shard = SHARDS[0]!;
    const users = [uniqueId("au-month"), uniqueId("au-month")];
    const july = (day: number, hour = 12) => Date.UTC(2025, 6, day, hour);
    const receipts = await seed(shard, [
      { app_user_id: users[0]!, chain_id: "c", at: july(2) },
      { app_user_id: users[0]!, chain_id: "c", at: july(15) },
      { app_user_id: users[0]!, chain_id: "c", at: july(31, 23) },
      { app_user_id: users[1]!, chain_id: "c", at: july(10) },
      { app_user_id: users[1]!, chain_id: "c", at: july(20) },
    ]);
    const { bucket, puts } = countingPuts(await Promise.all(users.map(async (user) => archiveUserPrefix(await testUserKey(user)))));
    const runAt = async (at: number) => archiveShard(archiveShardOf(shard), bucket, HASH_KEY, { runId: uniqueId("run"), archiveAfterMs: AGE, now: () => new Date(at) });

    // The daily runs up to 14 September: 2 July is 74 days old then, but 31 July only 45 days less a day.
    for (const day of [20, 31]) await runAt(Date.UTC(2025, 7, day, 3));
    const lastWaiting = await runAt(Date.UTC(2025, 8, 14, 3));
    expect(lastWaiting.cutoff).toBe("2025-07-01T00:00:00.000Z");
    for (const whereabouts of (await whereaboutsOf(receipts)).values()) expect(whereabouts).toEqual({ lines: 0, row: true });
    expect(puts).toEqual([]);

    // 15 September: July is wholly 45 days old, and its objects are each put once.
    const moved = await runAt(Date.UTC(2025, 8, 15, 3));
    expect(moved.cutoff).toBe("2025-08-01T00:00:00.000Z");
    for (const whereabouts of (await whereaboutsOf(receipts)).values()) expect(whereabouts).toEqual({ lines: 1, row: false });
    expect(puts.sort()).toEqual([...(await expectedObjects(receipts, shard)).keys()].sort());
    expect(puts).toHaveLength(users.length);
  });

  it("an archive age of 0 moves every receipt at the next run, those of the month in progress too", async () => {
    const shard = SHARDS[1]!;
    const now = Date.now();
    const receipts = await seed(shard, [
      { app_user_id: uniqueId("au-zero"), chain_id: "c", at: now - 1000 },
      { app_user_id: uniqueId("au-zero"), chain_id: "c", at: now - 40 * DAY_MS },
    ]);
    const run = await archiveShard(archiveShardOf(shard), env.ARCHIVE, HASH_KEY, { runId: uniqueId("run"), archiveAfterMs: 0, now: () => new Date(now) });
    expect(run.cutoff).toBe(new Date(now).toISOString());
    for (const whereabouts of (await whereaboutsOf(receipts)).values()) expect(whereabouts).toEqual({ lines: 1, row: false });
  });

  it("a receipt falls before the cutoff from the instant archiveDueAt names, and not a millisecond sooner", () => {
    for (const made of ["2025-01-31T23:59:59.999Z", "2025-02-01T00:00:00.000Z", "2025-02-14T10:00:00.000Z", "2024-12-31T12:00:00.000Z"]) {
      for (const age of [0, DAY_MS, AGE, 90 * DAY_MS]) {
        const createdAt = new Date(made);
        const due = archiveDueAt(createdAt, age).getTime();
        const before = (at: number) => createdAt.getTime() < archiveCutoff(new Date(at), age).getTime();
        // An age of 0 moves a receipt at any run after it was made.
        expect([before(due - 1), before(due + (age === 0 ? 1 : 0))], `${made} at ${age / DAY_MS} days`).toEqual([false, true]);
      }
    }
  });
});

/** A bucket whose calls go through `hook` first, which may fail them: R2 calls failing mid-page. */
function bucketWith(hook: (call: string, key: string, when: "before" | "after") => Promise<void> | void): ArchiveBucket {
  return {
    async get(key) {
      await hook("get", key, "before");
      const object = await env.ARCHIVE.get(key);
      await hook("get", key, "after");
      return object;
    },
    async put(key, value, options) {
      await hook("put", key, "before");
      const object = await env.ARCHIVE.put(key, value, options);
      await hook("put", key, "after");
      return object;
    },
  };
}

/** A shard whose batches go through `hook` first, before or after they commit. */
function shardWith(shard: Shard, hook: (when: "before" | "after") => void): JobShard {
  const plain = archiveShardOf(shard);
  return {
    ...plain,
    run: async (statements) => {
      hook("before");
      const rows = await plain.run(statements);
      hook("after");
      return rows;
    },
  };
}

describe("docs/storage.md#archive: nothing lost or doubled if the move is cut off anywhere", () => {
  it("cut off before and after every D1 batch and every R2 call, then run again: every receipt exactly once, in R2, its row gone", async () => {
    const shard = SHARDS[0]!;
    for (let cut = 1; ; cut += 1) {
      const users = [uniqueId("au"), uniqueId("au")];
      const receipts = await seed(shard, spread(users, 1).slice(0, 5).concat(spread(users, 1).slice(-3)));
      let calls = 0;
      const tick = () => {
        calls += 1;
        if (calls === cut) throw new Error(`cut off at call ${cut}`);
      };
      const options = { runId: uniqueId("run"), archiveAfterMs: 0 };
      const cutOff = await archiveShard(shardWith(shard, tick), bucketWith(tick), HASH_KEY, options).then(
        () => false,
        (error: Error) => (expect(error.message).toBe(`cut off at call ${cut}`), true),
      );
      // Cut off anywhere, each receipt is in D1, in R2, or in both; never in neither.
      for (const { lines, row } of (await whereaboutsOf(receipts)).values()) expect(lines + (row ? 1 : 0)).toBeGreaterThan(0);
      await archiveShard(archiveShardOf(shard), env.ARCHIVE, HASH_KEY, options);
      for (const { lines, row } of (await whereaboutsOf(receipts)).values()) expect({ cut, lines, row }).toEqual({ cut, lines: 1, row: false });
      expect(await objectsOfUsers(users)).toEqual(await expectedObjects(receipts, shard));
      if (!cutOff) break;
    }
  }, 120_000);

  it("every step run again after it committed (a restart between commit and record) moves each receipt once and counts it once", async () => {
    const shard = SHARDS[1]!;
    const users = [uniqueId("au"), uniqueId("au")];
    const receipts = await seed(shard, spread(users, 3));
    const twice = async <T,>(_name: string, work: () => Promise<T>) => {
      await work();
      return work();
    };
    const run = await archiveShard(archiveShardOf(shard), env.ARCHIVE, HASH_KEY, { runId: uniqueId("run"), archiveAfterMs: 0, steps: twice });
    expect(run.receipts).toBeGreaterThanOrEqual(receipts.length);
    for (const { lines, row } of (await whereaboutsOf(receipts)).values()) expect({ lines, row }).toEqual({ lines: 1, row: false });
    expect(await objectsOfUsers(users)).toEqual(await expectedObjects(receipts, shard));
  });

  it("in the Workflow, a page step that fails is retried, and one that keeps failing fails the instance with a job log line; the next run finishes the move", async () => {
    const shard = SHARDS[2]!;
    const users = [uniqueId("au")];
    const receipts = await seed(shard, spread(users, 2));
    const retried = await runWorkflow(shard, (m) => m.mockStepError({ name: "move page 0" }, new Error("R2 unavailable"), 2));
    expect(retried.complete).toBe(true);
    for (const { lines, row } of (await whereaboutsOf(receipts)).values()) expect({ lines, row }).toEqual({ lines: 1, row: false });

    const more = await seed(shard, spread([uniqueId("au")], 1));
    const id = uniqueId("archive");
    const logged: string[] = [];
    const error = console.error;
    console.error = (...args: unknown[]) => void logged.push(args.map(String).join(" "));
    try {
      await using instance = await introspectWorkflowInstance(env.ARCHIVING, id);
      await instance.modify(async (m) => {
        await m.disableRetryDelays();
        await m.mockStepError({ name: "move page 0" }, new Error("R2 unavailable"));
      });
      await env.ARCHIVING.create({ id, params: { shard: shard.name } });
      await instance.waitForStatus("errored");
    } finally {
      console.error = error;
    }
    const failures = logged.filter((line) => line.includes('"event":"job"')).map((line) => JSON.parse(line) as Record<string, unknown>);
    expect(failures).toEqual([expect.objectContaining({ level: "error", event: "job", job: "archive", instance_id: id, outcome: "failed" })]);
    for (const { row } of (await whereaboutsOf(more)).values()) expect(row).toBe(true);
    await runWorkflow(shard);
    for (const { lines, row } of (await whereaboutsOf(more)).values()) expect({ lines, row }).toEqual({ lines: 1, row: false });
  });
});

describe("docs/storage.md#archive-pages: a page run again after one of its puts failed", () => {
  /**
   * Seeds an early and a late receipt of one app user and chain, months apart (two objects), on a
   * shard whose older receipts a move took first, so that the next run moves these two alone; and
   * a bucket whose put of the late object fails once, after the early one is in R2.
   */
  async function twoObjectsLaterPutFailing(shard: Shard, clientId: string, chain: string) {
    await archiveShard(archiveShardOf(shard), env.ARCHIVE, HASH_KEY, { runId: uniqueId("run"), archiveAfterMs: 0 });
    const user = uniqueId("au");
    const receipts = await seed(shard, [70, 10].map((daysAgo) => ({ app_user_id: user, chain_id: chain, at: Date.now() - daysAgo * DAY_MS })));
    await shard.db.prepare("UPDATE receipts SET client_id = ?1 WHERE app_user_id = ?2").bind(clientId, user).run();
    const userKey = await testUserKey(user);
    const [earlyKey, lateKey] = receipts.map((r) => archiveObjectKey(userKey, chain, r.receipt_id, shard.name)) as [string, string];
    let failed = false;
    const bucket = bucketWith(async (verb, key, when) => {
      if (verb !== "put" || key !== lateKey || when !== "before" || failed) return;
      while ((await env.ARCHIVE.head(earlyKey)) === null) await new Promise((resolve) => setTimeout(resolve, 10));
      failed = true;
      throw new Error("R2 unavailable");
    });
    return { user, receipts: receipts as [ArchivedReceipt, ArchivedReceipt], earlyKey, lateKey, bucket };
  }

  it("docs/api.md#archive a receipt deleted between the attempts, whose line the first one put, leaves R2 and keeps its tombstone", async () => {
    const caller = await newCaller();
    const shard = SHARDS[0]!;
    const chain = caller.client.chains[0]!;
    const { user, receipts, earlyKey, bucket } = await twoObjectsLaterPutFailing(shard, caller.client.clientId, chain);
    const [early, late] = receipts;
    let answered: number | undefined;
    // The step fails; before it runs again, the POS deletes the early receipt, still a live row.
    const retriedAfterDelete = async <T,>(name: string, work: () => Promise<T>): Promise<T> => {
      try {
        return await work();
      } catch (error) {
        if (!name.startsWith("move page") || answered !== undefined) throw error;
        const headers = { Authorization: `Bearer ${caller.token}`, receipt_id: early.receipt_id, client_id: caller.client.clientId, chain_id: chain, app_user_id: user };
        answered = (await call(PATHS.delete, { headers })).status;
        return work();
      }
    };
    const runId = uniqueId("run");
    const run = await archiveShard(archiveShardOf(shard), bucket, HASH_KEY, { runId, archiveAfterMs: 0, steps: retriedAfterDelete });
    expect(answered).toBe(200);
    const where = await whereaboutsOf(receipts);
    expect(where.get(early.receipt_id)).toEqual({ lines: 0, row: false });
    expect(where.get(late.receipt_id)).toEqual({ lines: 1, row: false });
    expect(await tombstoneOf(early.receipt_id)).toMatchObject({ object_key: earlyKey, purged_at: expect.any(String) });
    expect(run).toMatchObject({ receipts: 1, objects: 2 });
    // The page's record is settled and gone.
    expect(await shard.db.prepare("SELECT COUNT(*) AS n FROM archive_pages WHERE run_id = ?1").bind(runId).first("n")).toBe(0);
  });

  it("npm run archive -- status: the objects an attempt created before it failed count once in its run's objects", async () => {
    const caller = await newCaller();
    const shard = SHARDS[1]!;
    const { receipts, bucket } = await twoObjectsLaterPutFailing(shard, caller.client.clientId, caller.client.chains[0]!);
    const retriedOnce = async <T,>(_name: string, work: () => Promise<T>): Promise<T> => work().catch(() => work());
    const runId = uniqueId("run");
    const run = await archiveShard(archiveShardOf(shard), bucket, HASH_KEY, { runId, archiveAfterMs: 0, steps: retriedOnce });
    for (const { lines, row } of (await whereaboutsOf(receipts)).values()) expect({ lines, row }).toEqual({ lines: 1, row: false });
    expect(run).toMatchObject({ receipts: 2, objects: 2 });
    const recorded = await shard.db.prepare("SELECT receipts, objects FROM archive_runs WHERE run_id = ?1").bind(runId).first();
    expect(recorded).toEqual({ receipts: 2, objects: 2 });
  });

  it("a page whose run stopped for good after a put: the next run's start tombstones and purges the line of a receipt deleted since, and counts the object", async () => {
    const caller = await newCaller();
    const shard = SHARDS[2]!;
    const chain = caller.client.chains[0]!;
    const { user, receipts, earlyKey, bucket } = await twoObjectsLaterPutFailing(shard, caller.client.clientId, chain);
    const [early, late] = receipts;
    const stopped = uniqueId("run");
    await expect(archiveShard(archiveShardOf(shard), bucket, HASH_KEY, { runId: stopped, archiveAfterMs: 0 })).rejects.toThrow("R2 unavailable");
    const headers = { Authorization: `Bearer ${caller.token}`, receipt_id: early.receipt_id, client_id: caller.client.clientId, chain_id: chain, app_user_id: user };
    expect((await call(PATHS.delete, { headers })).status).toBe(200);
    // The stopped run counts as stopped for good a day after it started.
    await shard.db.prepare("UPDATE archive_runs SET started_at = ?2 WHERE run_id = ?1").bind(stopped, new Date(Date.now() - 2 * DAY_MS).toISOString()).run();
    await archiveShard(archiveShardOf(shard), env.ARCHIVE, HASH_KEY, { runId: uniqueId("run"), archiveAfterMs: 0 });
    const where = await whereaboutsOf(receipts);
    expect(where.get(early.receipt_id)).toEqual({ lines: 0, row: false });
    expect(where.get(late.receipt_id)).toEqual({ lines: 1, row: false });
    expect(await tombstoneOf(early.receipt_id)).toMatchObject({ object_key: earlyKey, purged_at: expect.any(String) });
    expect(await shard.db.prepare("SELECT objects FROM archive_runs WHERE run_id = ?1").bind(stopped).first("objects")).toBe(1);
  });
});

describe("docs/storage.md#archive: races with delete and erasure", () => {
  it("a POS delete between a receipt's copy and its row's removal: answered as usual, and its line purged from the archive, the others moved", async () => {
    const caller = await newCaller();
    const shard = SHARDS[0]!;
    const user = uniqueId("au");
    const chain = caller.client.chains[0]!;
    const receipts = await seed(shard, [0, 1, 2].map((i) => ({ app_user_id: user, chain_id: chain, at: Date.now() - 10 * DAY_MS + i })));
    await shard.db.prepare("UPDATE receipts SET client_id = ?1 WHERE app_user_id = ?2").bind(caller.client.clientId, user).run();
    const victim = receipts[1]!;
    let answered: number | undefined;
    // Once the object is written and read back, the delete comes in before the move's batch.
    const bucket = bucketWith(async (verb, _key, when) => {
      if (verb === "get" && when === "after" && answered === undefined && (await env.ARCHIVE.head(_key)) !== null) {
        const headers = { Authorization: `Bearer ${caller.token}`, receipt_id: victim.receipt_id, client_id: caller.client.clientId, chain_id: chain, app_user_id: user };
        answered = (await call(PATHS.delete, { headers })).status;
      }
    });
    await archiveShard(archiveShardOf(shard), bucket, HASH_KEY, { runId: uniqueId("run"), archiveAfterMs: 0 });
    expect(answered).toBe(200);
    const where = await whereaboutsOf(receipts);
    expect(where.get(victim.receipt_id)).toEqual({ lines: 0, row: false });
    for (const other of [receipts[0]!, receipts[2]!]) expect(where.get(other.receipt_id)).toEqual({ lines: 1, row: false });
    const tombstone = await shard.db.prepare("SELECT * FROM archive_tombstones WHERE receipt_id = ?1").bind(victim.receipt_id).first();
    expect(tombstone).toMatchObject({ object_key: archiveObjectKey(await testUserKey(user), chain, victim.receipt_id, shard.name), purged_at: expect.any(String) });
  });

  it("an erasure's fence written between the copy and the batch: the rows stay for the erasure, and no line of them stays in R2", async () => {
    const shard = SHARDS[1]!;
    const user = uniqueId("au");
    const receipts = await seed(shard, [{ app_user_id: user, chain_id: "c", at: Date.now() - DAY_MS }, { app_user_id: user, chain_id: "c", at: Date.now() - 40 * DAY_MS }]);
    let fenced = false;
    const bucket = bucketWith(async (verb, key, when) => {
      if (verb === "get" && when === "after" && !fenced && (await env.ARCHIVE.head(key)) !== null) {
        fenced = true;
        await bound(shard.db, writeFence(await pseudonym(user, HASH_KEY), new Date().toISOString())).run();
      }
    });
    await archiveShard(archiveShardOf(shard), bucket, HASH_KEY, { runId: uniqueId("run"), archiveAfterMs: 0 });
    for (const { lines, row } of (await whereaboutsOf(receipts)).values()) expect({ lines, row }).toEqual({ lines: 0, row: true });
    // A fenced app user's receipts are not copied at all by the next run.
    await archiveShard(archiveShardOf(shard), env.ARCHIVE, HASH_KEY, { runId: uniqueId("run"), archiveAfterMs: 0 });
    for (const { lines, row } of (await whereaboutsOf(receipts)).values()) expect({ lines, row }).toEqual({ lines: 0, row: true });
  });

  it("two moves of one shard at once: each receipt once, none taken for deleted", async () => {
    const shard = SHARDS[2]!;
    const users = [uniqueId("au"), uniqueId("au"), uniqueId("au")];
    const receipts = await seed(shard, spread(users, 2));
    const retrying = async <T,>(_name: string, work: () => Promise<T>): Promise<T> => {
      for (let attempt = 1; ; attempt += 1) {
        try {
          return await work();
        } catch (error) {
          if (attempt === 10) throw error;
        }
      }
    };
    await Promise.all(
      [1, 2].map(() => archiveShard(archiveShardOf(shard), env.ARCHIVE, HASH_KEY, { runId: uniqueId("run"), archiveAfterMs: 0, steps: retrying })),
    );
    for (const { lines, row } of (await whereaboutsOf(receipts)).values()) expect({ lines, row }).toEqual({ lines: 1, row: false });
    const ids = receipts.map((r) => r.receipt_id);
    const tombstones = await shard.db.prepare("SELECT COUNT(*) AS n FROM archive_tombstones WHERE receipt_id IN (SELECT value FROM json_each(?1))").bind(JSON.stringify(ids)).first<{ n: number }>();
    expect(tombstones!.n).toBe(0);
  });
});

describe("the cron starts the move once a day per shard", () => {
  it("starts an instance per shard under the day's ID; a second start the same day changes nothing", async () => {
    await using introspector = await introspectWorkflow(env.ARCHIVING);
    const now = new Date(Date.UTC(2031, 0, 5, 3, 0));
    expect([3, 4, 5].map((minute) => startsArchives(new Date(Date.UTC(2031, 0, 5, 3, minute))))).toEqual([true, true, false]);
    const lines = await consoleLines(async () => {
      await startDailyArchives(env, now);
      await startDailyArchives(env, now);
    });
    expect(lines.filter((line) => line.includes('"level":"error"'))).toEqual([]);
    const instances = await introspector.get();
    expect(instances).toHaveLength(SHARDS.length);
    for (const instance of instances) await instance.waitForStatus("complete");
    for (const shard of SHARDS) expect((await env.ARCHIVING.get(dailyArchiveId(shard.name, now))).id).toBe(dailyArchiveId(shard.name, now));
  });
});
