/**
 * One Workers Analytics Engine data point per API request and per push attempt (docs/operations.md
 * "Metrics"): the `METRICS` binding of both Workers, one dataset. The layout below is the one
 * place that says which blob or double holds what; `npm run stats` (scripts/lib/stats.ts) queries
 * by it. A data point holds identifiers of clients, chains and shards, outcomes and sizes: never
 * an app_user_id, a receipt_id, receipt content, a token or a secret.
 *
 * Analytics Engine's `writeDataPoint` returns at once and sends the point after the invocation;
 * a point that cannot be written is dropped, never the request's failure.
 */

/** The dataset both Workers' `METRICS` binding writes to (wrangler.jsonc, src/notifier/wrangler.jsonc). */
export const METRICS_DATASET = "receipts_v2";

/** The dataset's columns by what they hold; `index1` is the client_id, Analytics Engine's sampling key. */
export const METRIC_COLUMNS = {
  clientId: "index1",
  kind: "blob1",
  route: "blob2",
  outcome: "blob3",
  chainId: "blob4",
  shard: "blob5",
  method: "blob6",
  status: "double1",
  durationMs: "double2",
  bytes: "double3",
  delayMs: "double4",
} as const;

/** What a data point is about: an API request, or one push of an event to the app push service. */
export type MetricKind = "request" | "push";

/** One data point, by field; written in {@link METRIC_COLUMNS}' order. */
export interface MetricPoint {
  kind: MetricKind;
  /** The API path (an unknown one as "other"), or the pushed event's type. */
  route: string;
  /** A request's "ok", "refused" or "failed"; a push's "delivered", "retry" or "refused". */
  outcome: string;
  clientId?: string;
  chainId?: string;
  shard?: string;
  /** A request's method; none for a push. */
  method?: string;
  /** The HTTP status answered, or the push service's (0: no answer). */
  status: number;
  durationMs: number;
  /** The request body's declared length, or the pushed body's length. */
  bytes: number;
  /** A push: from the event's change to this attempt's end. */
  delayMs?: number;
}

/** Analytics Engine's bound on an index (96 bytes); an ID here is ASCII, so characters are bytes. */
const INDEX_MAX = 96;
/** A blob is cut here: IDs are at most 256 characters, and the points stay small. */
const BLOB_MAX = 256;

/** An Analytics Engine dataset as this file writes to it (the binding's type, without the Workers types the scripts lack). */
export interface MetricsDataset {
  writeDataPoint(point: { indexes: string[]; blobs: string[]; doubles: number[] }): void;
}

/** Writes one data point; a dataset that is absent (a test's bare env) or that throws drops it. */
export function writeMetric(dataset: MetricsDataset | undefined, point: MetricPoint): void {
  if (!dataset) return;
  const blob = (value: string | undefined) => (value ?? "").slice(0, BLOB_MAX);
  try {
    dataset.writeDataPoint({
      indexes: [(point.clientId ?? "").slice(0, INDEX_MAX)],
      blobs: [point.kind, blob(point.route), blob(point.outcome), blob(point.chainId), blob(point.shard), blob(point.method)],
      doubles: [point.status, Math.max(0, point.durationMs), Math.max(0, point.bytes), Math.max(0, point.delayMs ?? 0)],
    });
  } catch {
    // A metric never costs a request or a delivery.
  }
}
