/**
 * Where `npm run shards` reads and writes shard states: the SHARD_STATES KV namespace (the
 * records src/storage/shard-states.ts reads in the Worker), of the local state opened in-process
 * (scripts/lib/local-state.ts), or the deployed one through `wrangler kv`.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { shardStateKey, type ShardState } from "../../src/shared/shard-ids.ts";
import { localState, type LocalState } from "./local-state.ts";
import type { ConfigPaths, ConfigShard } from "./shards.ts";
import { targetFlags, wrangler, type Target } from "./wrangler.ts";

/** The states of one target's shards. */
export interface ShardStates {
  /** The states of these shards, by name; a shard without a record has none here. */
  read(shards: readonly ConfigShard[]): Promise<Map<string, ShardState>>;
  write(name: string, state: ShardState): Promise<void>;
}

/** The target's SHARD_STATES of the config `configs.api`: the local state's in-process, the deployment's through wrangler. */
export function shardStatesOf(target: Target, configs: ConfigPaths): ShardStates {
  return target.remote ? wranglerShardStates(target, configs) : localShardStates(localState(target, configs.api));
}

/** The SHARD_STATES namespace of a local state opened in this process. */
export function localShardStates(state: LocalState): ShardStates {
  return {
    async read(shards) {
      const states = new Map<string, ShardState>();
      for (const shard of shards) {
        const text = await state.kv("SHARD_STATES", (namespace) => namespace.get(shardStateKey(shard.name), "text"));
        if (text !== null) states.set(shard.name, JSON.parse(text) as ShardState);
      }
      return states;
    },
    async write(name, record) {
      await state.kv("SHARD_STATES", (namespace) => namespace.put(shardStateKey(name), JSON.stringify(record)));
    },
  };
}

/** The target's SHARD_STATES through wrangler, one wrangler run a call: the deployment's. */
function wranglerShardStates(target: Target, configs: ConfigPaths): ShardStates {
  return {
    async read(shards) {
      const states = new Map<string, ShardState>();
      if (shards.length === 0) return states;
      const dir = mkdtempSync(path.join(tmpdir(), "receipts-shards-"));
      try {
        const file = path.join(dir, "keys.json");
        // KV's bulk read takes 100 keys a call; a deployment with more shards than that has other worries.
        writeFileSync(file, JSON.stringify(shards.map((shard) => shardStateKey(shard.name))));
        const values = JSON.parse(
          wrangler(["kv", "bulk", "get", file, "--binding", "SHARD_STATES", "-c", configs.api, ...targetFlags(target)]),
        ) as Record<string, { value: string | null } | null>;
        for (const shard of shards) {
          const value = values[shardStateKey(shard.name)]?.value;
          if (value) states.set(shard.name, JSON.parse(value) as ShardState);
        }
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
      return states;
    },
    async write(name, state) {
      wrangler([
        "kv", "key", "put", shardStateKey(name), JSON.stringify(state),
        "--binding", "SHARD_STATES", "-c", configs.api, ...targetFlags(target),
      ]);
    },
  };
}
