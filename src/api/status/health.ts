/**
 * The service's health (docs/operations.md "Status"), as `GET /receipts/v2/status` answers it and
 * `npm run status` prints it: per shard its state, fill and migrations; delivery; the archive; the
 * clients; and every threshold passed, as a reason. Read from what the service already keeps: the
 * shard states in SHARD_STATES, one statement per shard (src/storage/health.ts), the client
 * records in CLIENTS (counted at most every 10 minutes).
 *
 * One invocation reads at most {@link STATUS_SHARD_BUDGET} shards (D1 allows 1,000 queries an
 * invocation): with more, each computation reads the shards this isolate read longest ago and
 * keeps the rest from its earlier reads, each shard stamped with when it was read, so a full
 * picture of 5,000 shards takes six computations (three minutes at one every 30 s).
 */
import { isShardOpen, timeOfId, type ShardState } from "../../shared/shard-ids.ts";
import type { ApiConfig, StatusThresholds } from "../../shared/config.ts";
import { describeError } from "../../shared/log.ts";
import { LEGACY_PREFIX, archiveDueAt, shardOfObjectKey } from "../../storage/archive/layout.ts";
import { EXPECTED_MIGRATION, HEALTH_COUNT_CAP, shardHealth, type ShardHealthRow } from "../../storage/health.ts";
import { readShardStates } from "../../storage/shard-states.ts";
import type { Shard } from "../../storage/shards.ts";
import { bound } from "../../storage/statement.ts";
import type { HealthReason, HealthReport, ShardHealth } from "../../shared/health-report.ts";
import { countClients } from "../auth/clients.ts";
import type { HealthMemory, ShardRead } from "../context.ts";

/** The most shards one computation reads, a statement each, under D1's 1,000 queries an invocation. */
export const STATUS_SHARD_BUDGET = 900;

/** Clients change rarely, and counting them reads every record: their counts are reused this long. */
const CLIENT_COUNT_MS = 10 * 60 * 1000;

/** What the status reads from. */
export interface HealthSources {
  shards: readonly Shard[];
  shardStates: KVNamespace;
  clients: KVNamespace;
  /** The archive's bucket: the status names the shards whose objects of the first layout are left. */
  archive: Pick<R2Bucket, "list">;
  config: Pick<ApiConfig, "shardFillBytes" | "archiveAfterMs">;
  thresholds: StatusThresholds;
}

/** The status: the isolate's copy while younger than STATUS_CACHE_SECONDS, else computed anew. */
export async function healthReport(sources: HealthSources, memory: HealthMemory, now = new Date()): Promise<HealthReport> {
  const cached = memory.report;
  if (cached && cached.until > now.getTime()) return cached.value;
  const value = await computeHealth(sources, memory, now);
  memory.report = { value, until: now.getTime() + sources.thresholds.cacheMs };
  return value;
}

async function computeHealth(sources: HealthSources, memory: HealthMemory, now: Date): Promise<HealthReport> {
  const { shards, config, thresholds } = sources;
  const [states, clients, firstLayout] = await Promise.all([
    readShardStates(sources.shardStates, shards),
    clientCounts(sources.clients, memory, now),
    firstLayoutShards(sources.archive),
  ]);
  // The shards never read first, then those read longest ago.
  const due = [...shards]
    .sort((a, b) => (memory.reads.get(a.name)?.at ?? -1) - (memory.reads.get(b.name)?.at ?? -1))
    .slice(0, STATUS_SHARD_BUDGET);
  await Promise.all(due.map(async (shard) => memory.reads.set(shard.name, await readShard(shard, now))));

  const reasons: HealthReason[] = [];
  const rows = shards.map((shard) => shardHealthOf(shard.name, states, memory.reads.get(shard.name), config, thresholds, now, reasons));
  if (!shards.some((shard) => isShardOpen(states, shard.name))) {
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
  const home = shards[0] ? memory.reads.get(shards[0].name)?.row : undefined;
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

async function clientCounts(kv: KVNamespace, memory: HealthMemory, now: Date): Promise<HealthReport["clients"]> {
  if (memory.clients && memory.clients.until > now.getTime()) return memory.clients.value;
  const value = await countClients(kv);
  memory.clients = { value, until: now.getTime() + CLIENT_COUNT_MS };
  return value;
}

// The shards named by the first page of the first layout's objects: one list, of a prefix that
// names nobody (the keys it answers never reach a trace). A page of 1,000 names every shard in
// practice; one it misses is named once the rename took the objects before it.
async function firstLayoutShards(archive: Pick<R2Bucket, "list">): Promise<string[]> {
  const { objects } = await archive.list({ prefix: LEGACY_PREFIX, limit: 1000 });
  return [...new Set(objects.map(({ key }) => shardOfObjectKey(key)))].sort();
}

async function readShard(shard: Shard, now: Date): Promise<ShardRead> {
  try {
    const { results, meta } = await bound(shard.db, shardHealth()).run<ShardHealthRow>();
    return { row: results[0] ?? null, bytes: (meta as { size_after?: number }).size_after ?? null, at: now.getTime() };
  } catch (error) {
    return { row: null, bytes: null, error: describeError(error), at: now.getTime() };
  }
}

// A shard's row of the report, adding the reasons it gives.
function shardHealthOf(
  name: string,
  states: ReadonlyMap<string, ShardState>,
  read: ShardRead | undefined,
  config: HealthSources["config"],
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
