/**
 * Shard states in the SHARD_STATES KV namespace, one key per shard (`shard:<name>`), written by
 * `npm run shards -- open|close|add` and by the fill check; read by the API Worker at most once a
 * minute per isolate, in one bulk read, so a change needs no deploy and costs no storage call on
 * a warm isolate's response path.
 */
import { shardStateKey, type ShardBase, type ShardState } from "../shared/shard-ids.ts";

// KV's own edge cache at its minimum, so that the isolate's minute is most of the delay.
const KV_CACHE_TTL_SECONDS = 30;

/** An isolate's copy of the shard states: one isolate serves one deployment, so one copy. */
export interface ShardStatesMemory {
  /** The states last read, and until when (epoch ms) they may be reused; none before the first read. */
  statesCopy?: { states: Map<string, ShardState>; until: number };
}

/**
 * The states of these shards: from this isolate's copy while it is younger than `maxAgeMs`
 * (SHARD_STATES_SECONDS, 60 in production: with KV's spread, a change lands within 65 s).
 */
export async function shardStates(
  kv: KVNamespace,
  shards: readonly ShardBase[],
  maxAgeMs: number,
  memory: ShardStatesMemory,
  now = Date.now(),
): Promise<Map<string, ShardState>> {
  const copy = memory.statesCopy;
  if (copy && copy.until > now) return copy.states;
  const states = await readShardStates(kv, shards);
  memory.statesCopy = { states, until: now + maxAgeMs };
  return states;
}

/**
 * The recorded states of these shards, in one bulk read past this isolate's copy: what the
 * fill check decides from. A shard with no record is open.
 */
export async function readShardStates(kv: KVNamespace, shards: readonly ShardBase[]): Promise<Map<string, ShardState>> {
  const read = await kv.get<ShardState>(
    shards.map((shard) => shardStateKey(shard.name)),
    { type: "json", cacheTtl: KV_CACHE_TTL_SECONDS },
  );
  const states = new Map<string, ShardState>();
  for (const shard of shards) {
    const state = read.get(shardStateKey(shard.name));
    if (state) states.set(shard.name, state);
  }
  return states;
}

/** Records a shard's state as the fill check decided it (full, or closed); this isolate sees it at once. */
export async function recordShardState(
  kv: KVNamespace,
  shard: ShardBase,
  state: ShardState,
  memory: ShardStatesMemory,
): Promise<void> {
  await kv.put(shardStateKey(shard.name), JSON.stringify(state));
  memory.statesCopy?.states.set(shard.name, state);
}
