/**
 * The shape of the status (docs/api.md#status): what src/api/status/health.ts computes, the
 * isolate keeps between computations (src/api/context.ts), the endpoint answers and
 * `npm run status` prints. Kept free of Workers types, for the script.
 */

/** A threshold passed: a code an alert matches, and what it means. */
export interface HealthReason {
  code:
    | "no_open_shard"
    | "shard_filling"
    | "shard_unreadable"
    | "migrations_lagging"
    | "delivery_late"
    | "failed_notices"
    | "endpoint_down"
    | "archive_behind"
    /** Objects of the archive's first layout are left: erasures refuse to start. */
    | "first_layout_left"
    /** Added by `npm run status`, which can list the erasure's Workflow instances. */
    | "erasure_failed";
  message: string;
  shard?: string;
}

/** One shard as the status shows it. */
export interface ShardHealth {
  name: string;
  state: "open" | "closed";
  /** When the fill check recorded it past SHARD_FILL_BYTES, if it did. */
  full_at: string | null;
  bytes: number | null;
  /** bytes ÷ SHARD_FILL_BYTES. */
  fill: number | null;
  latest_migration: string | null;
  migrations_lagging: boolean;
  undelivered: number | null;
  oldest_undelivered_at: string | null;
  failed_notices: number | null;
  oldest_receipt_at: string | null;
  /**
   * How long ago the oldest receipt in D1 fell due for the archive, in hours (0: not due yet): due
   * once it falls before the archive's cutoff, the archive age after the end of its month.
   */
  archive_behind_hours: number | null;
  last_archive_started_at: string | null;
  last_archive_finished_at: string | null;
  read_at: string | null;
  error?: string;
}

/** The whole status. */
export interface HealthReport {
  healthy: boolean;
  reasons: HealthReason[];
  checked_at: string;
  shards: ShardHealth[];
  delivery: {
    undelivered: number;
    oldest_undelivered_at: string | null;
    oldest_undelivered_age_seconds: number | null;
    failed_notices: number;
    endpoint: { down: boolean; down_since: string | null; up_since: string | null };
  };
  clients: { active: number; disabled: number };
  thresholds: {
    delivery_late_seconds: number;
    failed_notices: number;
    endpoint_down_seconds: number;
    fill_share: number;
    archive_behind_hours: number;
    expected_migration: string;
  };
}

/** The status as the endpoint answers it and `npm run status --json` prints it. */
export interface StatusBody {
  data: HealthReport;
  /** Only when unhealthy: each reason's code, and where to read more. */
  message?: string;
  status: "OK" | "Service Unavailable";
  status_code: 200 | 503;
}

/**
 * The answer around a report (docs/api.md#status): 200 when healthy; 503 when a threshold is
 * passed, its message naming each reason, so that a monitor that reads only the status code
 * alerts. The endpoint answers it, and `npm run status` prints it for a local state.
 */
export function statusBody(report: HealthReport, docsUrl: string): StatusBody {
  if (report.healthy) return { data: report, status: "OK", status_code: 200 };
  const codes = [...new Set(report.reasons.map((reason) => reason.code))];
  return { data: report, message: `Unhealthy: ${codes.join(", ")}. See data.reasons and ${docsUrl}.`, status: "Service Unavailable", status_code: 503 };
}
