/**
 * `npm run stats` (docs/operations.md "Metrics"): the SQL it sends to the Analytics
 * Engine SQL API, weighted by the sample interval, with only checked IDs in it, and the table it
 * prints from the API's documented answer (FORMAT JSON: meta, data, rows).
 */
import path from "node:path";
import { describe, expect, it } from "vitest";
import { UsageError } from "../../scripts/lib/cli.ts";
import { readConfigFile } from "../../scripts/lib/config.ts";
import { querySqlApi, sinceArgument, sqlSafeId, statsRows, statsSql, statsTableRows } from "../../scripts/lib/stats.ts";
import { METRICS_DATASET } from "../../src/shared/metrics.ts";
import { ROOT, runScript } from "../support/run-script.ts";

/** An answer in the SQL API's documented shape, 64-bit integers quoted as ClickHouse writes them. */
const ANSWER = {
  meta: [
    { name: "kind", type: "String" },
    { name: "grp", type: "String" },
    { name: "count", type: "UInt64" },
    { name: "errors", type: "UInt64" },
    { name: "failed", type: "UInt64" },
    { name: "p50_ms", type: "Float64" },
    { name: "p99_ms", type: "Float64" },
  ],
  data: [
    { kind: "push", grp: "pos_a", count: "40", errors: "10", failed: "0", p50_ms: 120, p99_ms: 900.4 },
    { kind: "request", grp: "pos_a", count: "2000", errors: "50", failed: "2", p50_ms: 12.2, p99_ms: 180.6 },
    { kind: "request", grp: "", count: "7", errors: "7", failed: "0", p50_ms: 1, p99_ms: 2 },
  ],
  rows: 3,
  rows_before_limit_at_least: 3,
};

describe("docs/operations.md npm run stats: the query", () => {
  it("counts and quantiles weigh each row by _sample_interval, over the period and group asked for", () => {
    const sql = statsSql({ since: sinceArgument("1h"), by: "chain" });
    expect(sql).toContain("SUM(_sample_interval) AS count");
    expect(sql).toContain("quantileExactWeighted(0.5, double2, _sample_interval)");
    expect(sql).toContain("quantileExactWeighted(0.99, double2, _sample_interval)");
    expect(sql).toContain("blob4 AS grp");
    expect(sql).toContain(`FROM ${METRICS_DATASET}`);
    expect(sql).toContain("timestamp > NOW() - INTERVAL '1' HOUR");
    expect(sql).not.toContain("index1 =");
    expect(statsSql({ since: sinceArgument("30m"), by: "client", clientId: "pos_lZp9", chainId: "c-1" })).toContain(
      "INTERVAL '30' MINUTE AND index1 = 'pos_lZp9' AND blob4 = 'c-1'",
    );
    expect(statsSql({ since: sinceArgument("7d"), by: "route" })).toContain("blob2 AS grp");
  });

  it.each(["pos'; DROP", "a b", "x\\", "a,b", "", "ü"])("an ID that could leave its literal is refused: %j", (id) => {
    expect(() => sqlSafeId("--client", id)).toThrow(UsageError);
  });

  it.each(["1", "h", "0h", "1w", "93d", "2209h"])("--since %j is refused", (since) => {
    expect(() => sinceArgument(since)).toThrow(UsageError);
  });

  it("both Workers write to the dataset it reads", () => {
    for (const config of ["wrangler.jsonc", "src/notifier/wrangler.jsonc"]) {
      expect(readConfigFile(path.join(ROOT, config)).analytics_engine_datasets).toContainEqual({ binding: "METRICS", dataset: METRICS_DATASET });
    }
  });
});

describe("docs/operations.md npm run stats: the answer", () => {
  it("reads the documented shape and prints counts, error rates and latencies", () => {
    const rows = statsRows(ANSWER);
    expect(rows[1]).toEqual({ kind: "request", group: "pos_a", count: 2000, errors: 50, failed: 2, p50_ms: 12.2, p99_ms: 180.6 });
    expect(statsTableRows(rows)).toEqual([
      ["push", "pos_a", "40", "25.00 %", "-", "120", "900"],
      ["request", "pos_a", "2000", "2.50 %", "0.10 %", "12", "181"],
      ["request", "(none)", "7", "100.00 %", "0.00 %", "1", "2"],
    ]);
    expect(() => statsRows({ errors: [{ message: "bad" }] })).toThrow("without a data array");
  });

  it("posts the SQL with the token to the account's SQL API; an error answer is an error", async () => {
    const sent: { url: string; init: RequestInit }[] = [];
    const ok = (async (url: string, init: RequestInit) => {
      sent.push({ url, init });
      return new Response(JSON.stringify(ANSWER));
    }) as unknown as typeof fetch;
    expect(await querySqlApi("SELECT 1", "acc123", "tok", ok)).toEqual(ANSWER);
    expect(sent[0]!.url).toBe("https://api.cloudflare.com/client/v4/accounts/acc123/analytics_engine/sql");
    expect(sent[0]!.init).toMatchObject({ method: "POST", body: "SELECT 1", headers: { Authorization: "Bearer tok" } });
    const denied = (async () => new Response("forbidden", { status: 403 })) as unknown as typeof fetch;
    await expect(querySqlApi("SELECT 1", "acc123", "tok", denied)).rejects.toThrow("answered 403");
  });

  it("without --remote: it says there is nothing local to read, exit 2; a bad --by or ID: exit 2", () => {
    const local = runScript("stats", []);
    expect(local.status).toBe(2);
    expect(local.stderr).toContain("keeps none");
    expect(runScript("stats", ["--by", "user", "--remote"]).status).toBe(2);
    expect(runScript("stats", ["--client", "x' OR 1=1", "--remote"]).status).toBe(2);
  });

  it("with --remote but no account or token: exit 1 naming both variables", () => {
    const result = runScript("stats", ["--remote"], undefined, { CLOUDFLARE_ACCOUNT_ID: undefined, CLOUDFLARE_API_TOKEN: undefined });
    expect(result.status).toBe(1);
    expect(result.stderr).toContain("CLOUDFLARE_ACCOUNT_ID and CLOUDFLARE_API_TOKEN");
  });
});
