/**
 * `npm run stats` (docs/operations.md "Metrics"): the SQL that reads the data points of
 * src/shared/metrics.ts through the Analytics Engine SQL API, and the table it prints. Analytics
 * Engine samples: each row stands for `_sample_interval` data points, so counts are sums of it and
 * quantiles are weighted by it (Cloudflare's "Sampling with Workers Analytics Engine" and SQL
 * reference). The SQL API takes no bind parameters, so every value that goes into the SQL is
 * checked against a pattern that cannot end a string literal.
 */
import { METRICS_DATASET, METRIC_COLUMNS as C } from "../../src/shared/metrics.ts";
import { UsageError } from "./cli.ts";

/** What the statistics are grouped by. */
export const STATS_GROUPS = { client: C.clientId, chain: C.chainId, route: C.route } as const;
export type StatsGroup = keyof typeof STATS_GROUPS;

/** A query's choices, checked. */
export interface StatsQuery {
  /** How far back, as Analytics Engine's INTERVAL takes it: an amount and a unit. */
  since: { amount: number; unit: "MINUTE" | "HOUR" | "DAY" };
  by: StatsGroup;
  clientId?: string;
  chainId?: string;
}

const UNITS = { m: "MINUTE", h: "HOUR", d: "DAY" } as const;
/** Analytics Engine keeps data points for three months. */
const MAX_DAYS = 92;

/** Reads `--since` (`30m`, `1h`, `7d`); anything else, or more than Analytics Engine keeps, is a UsageError. */
export function sinceArgument(text: string): StatsQuery["since"] {
  const match = /^([1-9][0-9]{0,5})([mhd])$/.exec(text);
  if (!match) throw new UsageError(`--since takes an amount and a unit (m, h or d), such as 1h or 7d, not ${JSON.stringify(text)}.`);
  const amount = Number(match[1]);
  const unit = UNITS[match[2] as keyof typeof UNITS];
  const days = unit === "DAY" ? amount : unit === "HOUR" ? amount / 24 : amount / 1440;
  if (days > MAX_DAYS) throw new UsageError(`--since reaches back at most ${MAX_DAYS} days: Analytics Engine keeps data points for three months.`);
  return { amount, unit };
}

// What a client_id or chain_id may hold to go into the SQL: no quote, backslash, space or comma.
const SAFE_ID = /^[A-Za-z0-9._~@:+\-]{1,256}$/;

/** Checks an ID that goes into the SQL; one that could reach past its literal is a UsageError. */
export function sqlSafeId(flag: string, value: string): string {
  if (!SAFE_ID.test(value)) {
    throw new UsageError(
      `${flag} must be 1 to 256 letters, digits or . _ ~ @ : + - (the SQL API takes no parameters, so nothing else goes into its SQL): ${JSON.stringify(value)}`,
    );
  }
  return value;
}

/**
 * The SQL of one query: per kind (request, push) and group, the data points they stand for, the
 * share that did not succeed (a request refused or failed, a push to retry or refused), the share
 * that failed on the service's side (a request's 5xx), and the weighted median and 99th
 * percentile of the duration.
 */
export function statsSql(query: StatsQuery): string {
  const group = STATS_GROUPS[query.by];
  const where = [`timestamp > NOW() - INTERVAL '${query.since.amount}' ${query.since.unit}`];
  if (query.clientId !== undefined) where.push(`${C.clientId} = '${sqlSafeId("--client", query.clientId)}'`);
  if (query.chainId !== undefined) where.push(`${C.chainId} = '${sqlSafeId("--chain", query.chainId)}'`);
  const notOk = `${C.outcome} NOT IN ('ok', 'delivered')`;
  return [
    `SELECT ${C.kind} AS kind, ${group} AS grp,`,
    `  SUM(_sample_interval) AS count,`,
    `  SUM(IF(${notOk}, _sample_interval, 0)) AS errors,`,
    `  SUM(IF(${C.outcome} = 'failed', _sample_interval, 0)) AS failed,`,
    `  quantileExactWeighted(0.5, ${C.durationMs}, _sample_interval) AS p50_ms,`,
    `  quantileExactWeighted(0.99, ${C.durationMs}, _sample_interval) AS p99_ms`,
    `FROM ${METRICS_DATASET}`,
    `WHERE ${where.join(" AND ")}`,
    `GROUP BY kind, grp`,
    `ORDER BY kind, count DESC`,
    `FORMAT JSON`,
  ].join("\n");
}

/** One printed row. */
export interface StatsRow {
  kind: string;
  group: string;
  count: number;
  errors: number;
  failed: number;
  p50_ms: number;
  p99_ms: number;
}

/**
 * The rows of the SQL API's answer to {@link statsSql}: `{"meta": [...], "data": [{...}], "rows": n}`
 * (FORMAT JSON, ClickHouse's shape, whose 64-bit integers may come quoted).
 */
export function statsRows(answer: unknown): StatsRow[] {
  const data = (answer as { data?: unknown } | null)?.data;
  if (!Array.isArray(data)) throw new Error(`The SQL API answered without a data array: ${JSON.stringify(answer).slice(0, 300)}`);
  return data.map((row: Record<string, unknown>) => ({
    kind: String(row.kind ?? ""),
    group: String(row.grp ?? ""),
    count: Number(row.count),
    errors: Number(row.errors),
    failed: Number(row.failed),
    p50_ms: Number(row.p50_ms),
    p99_ms: Number(row.p99_ms),
  }));
}

/** The rows as lines for a person: the group, requests, error rates, latencies. */
export function statsTableRows(rows: readonly StatsRow[]): string[][] {
  const percent = (part: number, whole: number) => (whole === 0 ? "-" : `${((100 * part) / whole).toFixed(2)} %`);
  return rows.map((row) => [
    row.kind,
    row.group === "" ? "(none)" : row.group,
    String(Math.round(row.count)),
    percent(row.errors, row.count),
    row.kind === "request" ? percent(row.failed, row.count) : "-",
    `${Math.round(row.p50_ms)}`,
    `${Math.round(row.p99_ms)}`,
  ]);
}

/** The header of {@link statsTableRows}. */
export const STATS_HEADER = ["KIND", "GROUP", "COUNT", "ERROR_RATE", "5XX_RATE", "P50_MS", "P99_MS"] as const;

/** Posts the SQL to the account's Analytics Engine SQL API and returns its parsed answer. */
export async function querySqlApi(sql: string, accountId: string, token: string, fetcher: typeof fetch = fetch): Promise<unknown> {
  const response = await fetcher(`https://api.cloudflare.com/client/v4/accounts/${accountId}/analytics_engine/sql`, {
    method: "POST",
    headers: { Authorization: `Bearer ${token}` },
    body: sql,
  });
  const text = await response.text();
  if (!response.ok) throw new Error(`The Analytics Engine SQL API answered ${response.status}: ${text.slice(0, 500)}`);
  return JSON.parse(text) as unknown;
}
