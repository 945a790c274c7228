/**
 * What moving a receipt to the archive costs, counted on the real local D1 and R2 as
 * docs/scale.md §10 counts it: R2 operations by class (a put is Class A, a get Class B) and
 * bytes stored per archived receipt, D1 statements and rows written per receipt moved. Receipts
 * as §1 models them: a 2,120-byte body, IDs of realistic length, 4 receipts per app user, chain
 * and month. Two ways of moving them: all of a month in one run (a backlog, or a run after a
 * pause), and day by day as the cron does once caught up, each receipt on a day of its own.
 * The figures print as one JSON line (`--silent=false`); the assertions pin them loosely.
 */
import { env } from "cloudflare:workers";
import { v7 as uuidv7 } from "uuid";
import { describe, expect, it } from "vitest";
import { parseAuditHashKey } from "../../src/shared/audit-hash-key.ts";
import { archiveShard } from "../../src/storage/archive/move.ts";
import type { JobShard } from "../../src/storage/steps.ts";
import type { ArchiveBucket } from "../../src/storage/archive/objects.ts";
import { idOnShard } from "../../src/storage/shards.ts";
import { runBatch } from "../../src/storage/statement.ts";
import { uniqueId } from "../support/api.ts";
import { TEST_AUDIT_HASH_KEY } from "../support/keys.ts";
import { SHARDS } from "../support/shards.ts";
import { archiveUserPrefix } from "../../src/storage/archive/layout.ts";
import { testUserKey } from "../support/user-keys.ts";

const shard = SHARDS[0]!;
const HASH_KEY = parseAuditHashKey(TEST_AUDIT_HASH_KEY);
const DAY_MS = 24 * 60 * 60 * 1000;
const USERS = 50;
const PER_OBJECT = 4;

interface Counts {
  classA: number;
  classB: number;
  statements: number;
  rowsWritten: number;
}

/** The bucket and the shard, counting what goes through them. */
function counted(counts: Counts): { bucket: ArchiveBucket; archive: JobShard } {
  return {
    bucket: {
      get: (key) => ((counts.classB += 1), env.ARCHIVE.get(key)),
      put: (key, value, options) => ((counts.classA += 1), env.ARCHIVE.put(key, value, options)),
    },
    archive: {
      ...shard,
      run: async (statements) => {
        const results = await runBatch(shard.db, statements);
        counts.statements += statements.length;
        counts.rowsWritten += results.reduce((sum, { meta }) => sum + (meta.rows_written ?? 0), 0);
        return results.map(({ results: rows }) => rows);
      },
    },
  };
}

/** A receipt body of 2,120 bytes, as §1 models one. */
function body(n: number): string {
  const text = JSON.stringify({ n, lines: "x".repeat(2_120) });
  return JSON.stringify({ n, lines: "x".repeat(2_120 - (text.length - 2_120)) });
}

/** Receipts of USERS app users, PER_OBJECT each in one chain and month, on the days given. */
async function seed(days: (i: number) => number): Promise<{ users: string[]; receipts: number }> {
  const users = Array.from({ length: USERS }, () => `${uniqueId("app-user")}-0a1b2c3d4e5f60718293`);
  const monthStart = Date.UTC(2026, 5, 1);
  const insert = "INSERT INTO receipts (receipt_id, chain_id, client_id, app_user_id, body, created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)";
  let n = 0;
  for (const user of users) {
    const rows = Array.from({ length: PER_OBJECT }, (_, i) => {
      n += 1;
      const at = monthStart + days(i) * DAY_MS + n;
      return shard.db.prepare(insert).bind(idOnShard(uuidv7({ msecs: at }), shard), "chain-0123456789", "pos-client-0123456789", user, body(n), new Date(at).toISOString());
    });
    await shard.db.batch(rows);
  }
  return { users, receipts: n };
}

async function storedBytes(users: readonly string[]): Promise<{ bytes: number; objects: number }> {
  let bytes = 0;
  let objects = 0;
  for (const user of users) {
    const listed = await env.ARCHIVE.list({ prefix: archiveUserPrefix(await testUserKey(user)) });
    for (const object of listed.objects) {
      bytes += object.size;
      objects += 1;
    }
  }
  return { bytes, objects };
}

const per = (counts: Counts, receipts: number) => ({
  class_a_per_receipt: counts.classA / receipts,
  class_b_per_receipt: counts.classB / receipts,
  d1_statements_per_receipt: counts.statements / receipts,
  d1_rows_written_per_receipt: counts.rowsWritten / receipts,
});

describe("docs/scale.md §10 what moving a receipt to the archive costs, measured", () => {
  it("a month at once, and day by day: R2 operations, D1 rows written and bytes stored per receipt", async () => {
    // A month at once: four receipts per object written in one put.
    const monthly: Counts = { classA: 0, classB: 0, statements: 0, rowsWritten: 0 };
    const month = await seed((i) => i * 7);
    const once = counted(monthly);
    await archiveShard(once.archive, once.bucket, HASH_KEY, { runId: uniqueId("run"), archiveAfterMs: 0 });
    const monthStored = await storedBytes(month.users);

    // Day by day: each receipt reaches the age on a day of its own, so each run appends one
    // line to an object that exists (but the first).
    const daily: Counts = { classA: 0, classB: 0, statements: 0, rowsWritten: 0 };
    const days = await seed((i) => i * 7);
    const firstDay = Date.UTC(2026, 5, 1);
    for (let i = 0; i < PER_OBJECT; i += 1) {
      const each = counted(daily);
      const endOfDay = firstDay + i * 7 * DAY_MS + DAY_MS;
      await archiveShard(each.archive, each.bucket, HASH_KEY, { runId: uniqueId("run"), archiveAfterMs: 0, now: () => new Date(endOfDay) });
    }
    const dailyStored = await storedBytes(days.users);

    const figures = {
      body_bytes: body(1).length,
      monthly: { ...per(monthly, month.receipts), bytes_per_archived_receipt: monthStored.bytes / month.receipts, objects: monthStored.objects },
      daily: { ...per(daily, days.receipts), bytes_per_archived_receipt: dailyStored.bytes / days.receipts, objects: dailyStored.objects },
    };
    console.log(JSON.stringify(figures));
    expect(figures.monthly.objects).toBe(USERS);
    expect(figures.monthly.class_a_per_receipt).toBeCloseTo(1 / PER_OBJECT, 5);
    expect(figures.daily.class_a_per_receipt).toBeCloseTo(1, 5);
    expect(figures.monthly.bytes_per_archived_receipt).toBeGreaterThan(2_120);
    expect(figures.monthly.bytes_per_archived_receipt).toBeLessThan(2_500);
  }, 120_000);
});
