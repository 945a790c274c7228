/**
 * What moving a receipt to the archive costs, counted on the real local D1 and R2 as
 * docs/scale.md §10 counts it: R2 operations by class (a put is Class A, a get Class B) and
 * bytes stored per archived receipt, D1 statements and rows written per receipt moved. Receipts
 * as §1 models them: a 2,120-byte body, IDs of realistic length, 4 receipts per app user, chain
 * and month, each object stored deflated (beside the bytes stored, the lines' bytes as text). Two
 * ways of moving them: all of a month in one run (a backlog, or the run after the month reached
 * the archive age), and day by day, each receipt on a day of its own.
 * The figures print as one JSON line (`--silent=false`); the assertions pin them loosely.
 */
import { env } from "cloudflare:workers";
import { v7 as uuidv7 } from "uuid";
import { describe, expect, it } from "vitest";
import { receiptBody } from "../../harness/bodies.ts";
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

// The bench's "2 KB" receipt (harness/bodies.ts), 2,120 bytes, as §1 models one.
const BENCH_RECEIPT = JSON.parse(receiptBody(2 * 1024)) as { line_items: { quantity: number; sku: string }[] } & Record<string, unknown>;

/**
 * The bench's receipt made the `n`th, about 2,120 bytes: its number, its items' SKUs and prices
 * its own. Objects are stored deflated, so receipts alike but for their
 * number would deflate against each other to almost nothing and say nothing of the bytes R2
 * keeps; a store's receipts share their items' words, not their every figure.
 */
function body(n: number): string {
  const lineItems = BENCH_RECEIPT.line_items.map((item, i) => {
    const unitPrice = 100 + ((n * 7919 + i * 37) % 900);
    return { ...item, unit_price: unitPrice, total: item.quantity * unitPrice, sku: `SKU-${String(n * 100 + i).padStart(8, "0")}` };
  });
  const total = lineItems.reduce((sum, item) => sum + item.total, 0);
  const receipt = { ...BENCH_RECEIPT, total, line_items: lineItems, payments: [{ method: "card", amount: total }] };
  return JSON.stringify({ ...receipt, pos_receipt_number: `0042-2026-${String(n).padStart(6, "0")}` });
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
    const run = await archiveShard(once.archive, once.bucket, HASH_KEY, { runId: uniqueId("run"), archiveAfterMs: 0 });
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
      monthly: { ...per(monthly, month.receipts), line_bytes_per_receipt: run.bytes / month.receipts, bytes_per_archived_receipt: monthStored.bytes / month.receipts, objects: monthStored.objects },
      daily: { ...per(daily, days.receipts), bytes_per_archived_receipt: dailyStored.bytes / days.receipts, objects: dailyStored.objects },
    };
    console.log(JSON.stringify(figures));
    expect(figures.monthly.objects).toBe(USERS);
    expect(figures.monthly.class_a_per_receipt).toBeCloseTo(1 / PER_OBJECT, 5);
    expect(figures.daily.class_a_per_receipt).toBeCloseTo(1, 5);
    // Deflated, an object of four such lines keeps about 278 bytes a receipt (2,354 as plain text).
    expect(figures.monthly.bytes_per_archived_receipt).toBeGreaterThan(250);
    expect(figures.monthly.bytes_per_archived_receipt).toBeLessThan(310);
  }, 120_000);
});
