/** docs/api.md#audit: the cron job's purge of audit records past their retention, on every shard. */
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { runScheduledJobs } from "../../src/api/scheduled.ts";
import { consoleLines, uniqueId } from "../support/api.ts";
import { SHARDS, rowsOnEveryShard } from "../support/shards.ts";

const DAY_MS = 24 * 60 * 60 * 1000;

/** Audit records of one chain on every shard, `ages` days old, and the chain's name. */
async function recordsAged(now: number, ages: number[]): Promise<string> {
  const chain = uniqueId("chain");
  for (const shard of SHARDS) {
    await shard.db.batch(
      ages.map((age) =>
        shard.db
          .prepare(`INSERT INTO audit_log (at, action, receipt_id, chain_id, client_id, app_user, request_id)
            VALUES (?, 'receipt.deleted', ?, ?, 'pos-1', 'au-1', 'ref')`)
          .bind(new Date(now - age * DAY_MS).toISOString(), uniqueId("r"), chain),
      ),
    );
  }
  return chain;
}

async function agesLeft(chain: string, now: number): Promise<number[]> {
  const rows = await rowsOnEveryShard<{ at: string }>("SELECT at FROM audit_log WHERE chain_id = ? ORDER BY at", chain);
  return rows.map(({ at }) => Math.round((now - Date.parse(at)) / DAY_MS));
}

describe("docs/api.md#audit the cron job purges audit records past AUDIT_RETENTION_DAYS", () => {
  it("keeps 400 days (wrangler.jsonc) and purges older records on every shard, logging how many per shard", async () => {
    const now = Date.now();
    const chain = await recordsAged(now, [401, 500, 399, 1]);
    const lines = await consoleLines(() => runScheduledJobs(env, new Date(now)));
    expect((await agesLeft(chain, now)).sort((a, b) => a - b)).toEqual(SHARDS.flatMap(() => [1, 399]).sort((a, b) => a - b));
    const purges = lines.map((line) => JSON.parse(line)).filter((line) => line.job === "audit.purge-expired");
    expect(purges.map((line) => line.shard).sort()).toEqual(SHARDS.map((shard) => shard.name));
    for (const line of purges) expect(line.purged).toBeGreaterThanOrEqual(2);
  });

  it("follows the setting: with AUDIT_RETENTION_DAYS = 30, a 31-day-old record goes", async () => {
    const now = Date.now();
    const chain = await recordsAged(now, [31, 29]);
    await consoleLines(() => runScheduledJobs({ ...env, AUDIT_RETENTION_DAYS: "30" }, new Date(now)));
    expect(await agesLeft(chain, now)).toEqual(SHARDS.map(() => 29));
  });

  it("works in bounded rounds: a backlog larger than one run's rounds drains over the next runs", async () => {
    const now = Date.now();
    const [shard] = SHARDS;
    await shard!.db
      .prepare(`WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 12000)
        INSERT INTO audit_log (at, action, receipt_id, chain_id, client_id, app_user, request_id)
        SELECT ?1, 'receipt.deleted', 'r' || i, 'backlog', 'pos-1', 'au-1', 'ref' FROM n`)
      .bind(new Date(now - 450 * DAY_MS).toISOString())
      .run();
    const left = async () => (await shard!.db.prepare("SELECT COUNT(*) AS n FROM audit_log WHERE chain_id = 'backlog'").first<{ n: number }>())!.n;
    await consoleLines(() => runScheduledJobs(env, new Date(now)));
    expect(await left()).toBe(2000);
    await consoleLines(() => runScheduledJobs(env, new Date(now)));
    expect(await left()).toBe(0);
  });
});
