/**
 * The fill check (docs/api.md#shards): D1 reports a database's size with every result, and a
 * shard past the threshold closes itself while another shard is recorded open and not full.
 * When none is, the service goes on writing, records the shard full, and logs an error line an
 * alert can match, at most once a minute.
 *
 * The decision is taken from the states recorded in SHARD_STATES, read fresh, never from what
 * one isolate has seen: a shard past the threshold first records itself full, then reads the
 * others. Of two isolates whose shards cross the threshold together, each writes its own mark
 * before it reads the other's, so at least one sees the other shard full (or closed) and keeps
 * its own shard open: the service does not close its last open shard by itself. KV carries a
 * write to other locations within about a minute; two isolates far apart that cross within it
 * are the window left.
 */
import { describeError, logLine } from "../shared/log.ts";
import { isShardOpen, type ShardBase, type ShardState } from "../shared/shard-ids.ts";
import { readShardStates, recordShardState, type ShardStatesMemory } from "./shard-states.ts";

const ALARM_INTERVAL_MS = 60_000;

/** What an isolate remembers of the shards' fill, beside its copy of their states. */
export interface FillMemory extends ShardStatesMemory {
  /** When this isolate last raised the all-shards-full alarm (epoch ms). */
  lastAlarm: number;
  /** When this isolate last recorded each shard full, by name: a shard is checked at most once a minute. */
  fullSince: Map<string, number>;
}

/**
 * Notes a shard's size after a write: past the threshold, records it full and closes it if
 * another shard is recorded open and not full, or else raises the alarm. Runs after the
 * response; never throws.
 */
export async function checkShardFill(
  kv: KVNamespace,
  written: { shard: ShardBase; bytes: number },
  context: { shards: readonly ShardBase[]; thresholdBytes: number; now: Date },
  memory: FillMemory,
): Promise<void> {
  const { shard, bytes } = written;
  if (bytes < context.thresholdBytes) return;
  const { now } = context;
  // Every write to a full shard passes the threshold: KV takes one write a second per key, and
  // the decision changes only when a state does, which the isolate reads once a minute anyway.
  const lastChecked = memory.fullSince.get(shard.name);
  if (lastChecked !== undefined && now.getTime() - lastChecked < ALARM_INTERVAL_MS) return raiseAlarm(written, context, memory);
  memory.fullSince.set(shard.name, now.getTime());
  try {
    const before = await readShardStates(kv, context.shards);
    const full: ShardState = { ...(before.get(shard.name) ?? { state: "open" }), full: { bytes, at: now.toISOString() } };
    if (full.state === "closed") return;
    await recordShardState(kv, shard, full, memory);
    // Read again after the mark: an isolate whose shard crossed at the same time has either
    // written its own mark by now, or will read this one.
    const states = await readShardStates(kv, context.shards);
    const roomElsewhere = context.shards.some(
      (other) => other.name !== shard.name && isShardOpen(states, other.name) && states.get(other.name)?.full === undefined,
    );
    if (roomElsewhere) {
      await recordShardState(kv, shard, { state: "closed", changed_at: now.toISOString(), by: "fill", full: full.full }, memory);
      logLine("warn", "shard-fill", { shard: shard.name, bytes, outcome: "closed: past the fill threshold" });
      return;
    }
  } catch (error) {
    logLine("error", "shard-fill", { shard: shard.name, bytes, outcome: "fill check failed", cause: describeError(error) });
    return;
  }
  raiseAlarm(written, context, memory);
}

// At most once a minute per isolate: the alert needs one line, not one per add.
function raiseAlarm(
  { shard, bytes }: { shard: ShardBase; bytes: number },
  { thresholdBytes, now }: { thresholdBytes: number; now: Date },
  memory: FillMemory,
): void {
  if (now.getTime() - memory.lastAlarm < ALARM_INTERVAL_MS) return;
  memory.lastAlarm = now.getTime();
  logLine("error", "shards-full", {
    shard: shard.name,
    bytes,
    threshold_bytes: thresholdBytes,
    outcome: "every open shard is past the fill threshold: add a shard",
  });
}
