/**
 * The service's health (docs/operations.md "Status") put together from what was read: the shard
 * states, each shard's row of src/storage/health.ts, the client counts and the first layout's
 * shards. The endpoint reads them through its bindings (./health.ts); `npm run status` reads a
 * local state's in its own process and puts them together here too, so both answer alike. This
 * file stays free of Workers types.
 */
import type { ApiConfig, StatusThresholds } from "../../shared/config.ts";
import type { HealthReason, HealthReport, ShardHealth } from "../../shared/health-report.ts";
import { isShardOpen, timeOfId, type ShardState } from "../../shared/shard-ids.ts";
import { LEGACY_PREFIX, archiveDueAt, shardOfObjectKey } from "../../storage/archive/layout.ts";
import { EXPECTED_MIGRATION, HEALTH_COUNT_CAP, type ShardRead } from "../../storage/health.ts";

/** What the status was read from, and its settings. */
export interface HealthInputs {
  /** Every shard's name, the first the home shard (where the notifier keeps the push service's state). */
  shards: readonly string[];
  states: ReadonlyMap<string, ShardState>;
  /** Each shard's last read; a shard without one shows nothing read. */
  reads: ReadonlyMap<string, ShardRead>;
  clients: HealthReport["clients"];
  /** The shards whose objects of the archive's first layout are left. */
  firstLayout: readonly string[];
  config: Pick<ApiConfig, "shardFillBytes" | "archiveAfterMs">;
  thresholds: StatusThresholds;
}

/** What the status needs of the archive's bucket: one listing. */
export interface ListedBucket {
  list(options: { prefix: string; limit: number }): Promise<{ objects: { key: string }[] }>;
}

/** The report of what was read, with every threshold passed as a reason. */
export function assembleHealth({ shards, states, reads, clients, firstLayout, config, thresholds }: HealthInputs, now: Date): HealthReport {
  const reasons: HealthReason[] = [];
  const rows = shards.map((shard) => shardHealthOf(shard, states, reads.get(shard), config, thresholds, now, reasons));
  if (!shards.some((shard) => isShardOpen(states, shard))) {
    reasons.unshift({ code: "no_open_shard", message: "Every shard is closed: every add is refused (503). Open or add a shard." });
  }

  const undelivered = rows.reduce((sum, row) => sum + (row.undelivered ?? 0), 0);
  const failed = rows.reduce((sum, row) => sum + (row.failed_notices ?? 0), 0);
  const oldest = rows.map((row) => row.oldest_undelivered_at).filter((at) => at !== null).sort()[0] ?? null;
  const ageMs = oldest === null ? null : Math.max(0, now.getTime() - Date.parse(oldest));
  const ageSeconds = ageMs === null ? null : Math.round(ageMs / 1000);
  if (ageMs !== null && ageMs > thresholds.deliveryLateMs) {
    reasons.push({ code: "delivery_late", message: `The oldest undelivered event waits for ${ageSeconds} s (threshold ${thresholds.deliveryLateMs / 1000} s).` });
  }
  if (failed >= thresholds.failedNotices) {
    reasons.push({ code: "failed_notices", message: `${failed} failed notice(s) wait for a replay (npm run notices -- failed).` });
  }
  for (const shard of firstLayout) {
    reasons.push({
      code: "first_layout_left",
      shard,
      message: `The archive holds objects of shard ${shard} in its first layout, named by app_user_id: erasures refuse to start until the archive's runs rename them (npm run archive -- run).`,
    });
  }
  // The home shard (the first) holds the notifier's view of the push service.
  const home = shards[0] === undefined ? undefined : reads.get(shards[0])?.row;
  const downSince = home?.endpoint_down_since ?? null;
  if (downSince !== null && now.getTime() - Date.parse(downSince) >= thresholds.endpointDownMs) {
    reasons.push({ code: "endpoint_down", message: `The app push service is marked down since ${downSince}.` });
  }

  return {
    healthy: reasons.length === 0,
    reasons,
    checked_at: now.toISOString(),
    shards: rows,
    delivery: {
      undelivered,
      oldest_undelivered_at: oldest,
      oldest_undelivered_age_seconds: ageSeconds,
      failed_notices: failed,
      endpoint: { down: downSince !== null, down_since: downSince, up_since: home?.endpoint_up_since ?? null },
    },
    clients,
    thresholds: {
      delivery_late_seconds: thresholds.deliveryLateMs / 1000,
      failed_notices: thresholds.failedNotices,
      endpoint_down_seconds: thresholds.endpointDownMs / 1000,
      fill_share: thresholds.fillShare,
      archive_behind_hours: thresholds.archiveBehindMs / 3_600_000,
      expected_migration: EXPECTED_MIGRATION,
    },
  };
}

/**
 * The shards named by the first page of the first layout's objects: one list, of a prefix that
 * names nobody (the keys it answers never reach a trace). A page of 1,000 names every shard in
 * practice; one it misses is named once the rename took the objects before it.
 */
export async function firstLayoutShards(archive: ListedBucket): Promise<string[]> {
  const { objects } = await archive.list({ prefix: LEGACY_PREFIX, limit: 1000 });
  return [...new Set(objects.map(({ key }) => shardOfObjectKey(key)))].sort();
}

// A shard's row of the report, adding the reasons it gives.
function shardHealthOf(
  name: string,
  states: ReadonlyMap<string, ShardState>,
  read: ShardRead | undefined,
  config: HealthInputs["config"],
  thresholds: StatusThresholds,
  now: Date,
  reasons: HealthReason[],
): ShardHealth {
  const state = isShardOpen(states, name) ? "open" : "closed";
  const row = read?.row ?? null;
  const fill = read?.bytes == null ? null : read.bytes / config.shardFillBytes;
  const oldestAt = row?.oldest_receipt_id ? isoTimeOfId(row.oldest_receipt_id) : null;
  // Behind from when the oldest receipt fell before the archive's cutoff: one waiting for its month to reach the age is not late.
  const pastAgeMs = oldestAt === null ? null : Math.max(0, now.getTime() - archiveDueAt(new Date(oldestAt), config.archiveAfterMs).getTime());
  const lagging = row !== null && (row.latest_migration ?? "") < EXPECTED_MIGRATION;
  if (read?.error !== undefined) reasons.push({ code: "shard_unreadable", shard: name, message: `Shard ${name} could not be read: ${read.error}` });
  if (state === "open" && fill !== null && fill >= thresholds.fillShare) {
    reasons.push({ code: "shard_filling", shard: name, message: `Open shard ${name} is at ${Math.round(fill * 100)} % of SHARD_FILL_BYTES: add a shard.` });
  }
  if (lagging) {
    reasons.push({ code: "migrations_lagging", shard: name, message: `Shard ${name} has migrations up to ${row.latest_migration ?? "none"}, the code expects ${EXPECTED_MIGRATION}: npm run shards -- migrate.` });
  }
  if (pastAgeMs !== null && pastAgeMs > thresholds.archiveBehindMs) {
    reasons.push({ code: "archive_behind", shard: name, message: `Shard ${name} keeps receipts that fell due for the archive ${Math.round(pastAgeMs / 3_600_000)} h ago: check its archive runs.` });
  }
  return {
    name,
    state,
    full_at: states.get(name)?.full?.at ?? null,
    bytes: read?.bytes ?? null,
    fill: fill === null ? null : Math.round(fill * 1000) / 1000,
    latest_migration: row?.latest_migration ?? null,
    migrations_lagging: lagging,
    undelivered: row ? Math.min(row.undelivered, HEALTH_COUNT_CAP) : null,
    oldest_undelivered_at: row?.oldest_undelivered_at ?? null,
    failed_notices: row ? row.failed_notices : null,
    oldest_receipt_at: oldestAt,
    archive_behind_hours: pastAgeMs === null ? null : Math.round(pastAgeMs / 360_000) / 10,
    last_archive_started_at: row?.last_archive_started_at ?? null,
    last_archive_finished_at: row?.last_archive_finished_at ?? null,
    read_at: read ? new Date(read.at).toISOString() : null,
    ...(read?.error === undefined ? {} : { error: read.error }),
  };
}

function isoTimeOfId(id: string): string | null {
  const ms = timeOfId(id);
  return Number.isFinite(ms) ? new Date(ms).toISOString() : null;
}
