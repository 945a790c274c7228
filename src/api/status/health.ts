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
import type { ApiConfig, StatusThresholds } from "../../shared/config.ts";
import type { HealthReport } from "../../shared/health-report.ts";
import { readShardStates } from "../../storage/shard-states.ts";
import type { Shard } from "../../storage/shards.ts";
import { bound } from "../../storage/statement.ts";
import { countClients } from "../auth/clients.ts";
import type { HealthMemory } from "../context.ts";
import { readShardHealth } from "../../storage/health.ts";
import { assembleHealth, firstLayoutShards, type ListedBucket } from "./assemble.ts";

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
  archive: ListedBucket;
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
  await Promise.all(due.map(async (shard) => memory.reads.set(shard.name, await readShardHealth((health) => bound(shard.db, health).run(), now))));
  return assembleHealth({ shards: shards.map((shard) => shard.name), states, reads: memory.reads, clients, firstLayout, config, thresholds }, now);
}

async function clientCounts(kv: KVNamespace, memory: HealthMemory, now: Date): Promise<HealthReport["clients"]> {
  if (memory.clients && memory.clients.until > now.getTime()) return memory.clients.value;
  const value = await countClients(kv);
  memory.clients = { value, until: now.getTime() + CLIENT_COUNT_MS };
  return value;
}
