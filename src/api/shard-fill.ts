/**
 * The fill check (docs/api.md#shards): D1 reports a database's size with every result, and a
 * shard past the threshold closes itself while another open shard has room. When none has, the
 * service goes on writing and logs an error line an alert can match, at most once a minute.
 */
import { describeError, logLine } from "../shared/log.ts";
import { closeFullShard } from "../storage/shard-states.ts";
import type { ShardState } from "../shared/shard-ids.ts";
import type { Shard } from "../storage/shards.ts";

const ALARM_INTERVAL_MS = 60_000;

// The last size this isolate saw of each shard; a shard it has not seen counts as having room.
const sizes = new Map<string, number>();
let lastAlarm = 0;

/**
 * Notes a shard's size after a write, and closes it or raises the alarm as the threshold says.
 * Runs after the response; never throws.
 */
export async function checkShardFill(
  kv: KVNamespace,
  written: { shard: Shard; bytes: number },
  context: { shards: readonly Shard[]; states: ReadonlyMap<string, ShardState>; thresholdBytes: number; now: Date },
): Promise<void> {
  const { shard, bytes } = written;
  sizes.set(shard.name, bytes);
  if (bytes < context.thresholdBytes) return;
  const isOpen = (other: Shard) => (context.states.get(other.name)?.state ?? "open") === "open";
  const roomElsewhere = context.shards.some(
    (other) => other !== shard && isOpen(other) && (sizes.get(other.name) ?? 0) < context.thresholdBytes,
  );
  if (roomElsewhere) {
    try {
      await closeFullShard(kv, shard, context.now);
      logLine("warn", "shard-fill", { shard: shard.name, bytes, outcome: "closed: past the fill threshold" });
    } catch (error) {
      logLine("error", "shard-fill", { shard: shard.name, bytes, outcome: "close failed", cause: describeError(error) });
    }
    return;
  }
  if (context.now.getTime() - lastAlarm < ALARM_INTERVAL_MS) return;
  lastAlarm = context.now.getTime();
  logLine("error", "shards-full", {
    shard: shard.name,
    bytes,
    threshold_bytes: context.thresholdBytes,
    outcome: "every open shard is past the fill threshold: add a shard",
  });
}
