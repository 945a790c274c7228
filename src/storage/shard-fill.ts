/**
 * The fill check (docs/api.md#shards): D1 reports a database's size with every result, and a
 * shard past the threshold closes itself while another open shard has room. When none has, the
 * service goes on writing and logs an error line an alert can match, at most once a minute.
 */
import { describeError, logLine } from "../shared/log.ts";
import { isShardOpen, type ShardBase, type ShardState } from "../shared/shard-ids.ts";
import { closeFullShard, type ShardStatesMemory } from "./shard-states.ts";

const ALARM_INTERVAL_MS = 60_000;

/** What an isolate remembers of the shards' fill, beside its copy of their states. */
export interface FillMemory extends ShardStatesMemory {
  /** The last size this isolate saw of each shard, by name; a shard it has not seen counts as having room. */
  sizes: Map<string, number>;
  /** When this isolate last raised the all-shards-full alarm (epoch ms). */
  lastAlarm: number;
}

/**
 * Notes a shard's size after a write, and closes it or raises the alarm as the threshold says.
 * Runs after the response; never throws.
 */
export async function checkShardFill(
  kv: KVNamespace,
  written: { shard: ShardBase; bytes: number },
  context: { shards: readonly ShardBase[]; states: ReadonlyMap<string, ShardState>; thresholdBytes: number; now: Date },
  memory: FillMemory,
): Promise<void> {
  const { shard, bytes } = written;
  memory.sizes.set(shard.name, bytes);
  if (bytes < context.thresholdBytes) return;
  const roomElsewhere = context.shards.some(
    (other) =>
      other !== shard && isShardOpen(context.states, other.name) && (memory.sizes.get(other.name) ?? 0) < context.thresholdBytes,
  );
  if (roomElsewhere) {
    try {
      await closeFullShard(kv, shard, context.now, memory);
      logLine("warn", "shard-fill", { shard: shard.name, bytes, outcome: "closed: past the fill threshold" });
    } catch (error) {
      logLine("error", "shard-fill", { shard: shard.name, bytes, outcome: "close failed", cause: describeError(error) });
    }
    return;
  }
  if (context.now.getTime() - memory.lastAlarm < ALARM_INTERVAL_MS) return;
  memory.lastAlarm = context.now.getTime();
  logLine("error", "shards-full", {
    shard: shard.name,
    bytes,
    threshold_bytes: context.thresholdBytes,
    outcome: "every open shard is past the fill threshold: add a shard",
  });
}
