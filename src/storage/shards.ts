/**
 * A Worker's shards (docs/api.md#shards): every D1 binding named `DB_<NAME>` of its bindings.
 * What a shard is and which one an ID names is said once, in src/shared/shard-ids.ts; where a
 * new receipt goes is src/storage/placement.ts.
 */
import { SHARD_BINDING_PREFIX, shardNameOfBinding, shardNamed, type ShardBase } from "../shared/shard-ids.ts";

// The Workers' code finds and stamps IDs beside their shards; these are the functions every
// part of the service uses.
export { idOnShard, shardOfId } from "../shared/shard-ids.ts";

/** One D1 database of a Worker holding a share of the receipts. */
export interface Shard extends ShardBase {
  db: D1Database;
}

// Keyed by the bindings object, which the runtime keeps for the deployment's life: the list is
// derived from it alone, so it holds no state of its own.
const shardLists = new WeakMap<object, Shard[]>();

/**
 * The shards among a Worker's bindings: every D1 binding named `DB_<NAME>`, ordered by name.
 * Found once per bindings object, so a deploy that adds a binding needs no other change.
 */
export function shardsOf(env: object): Shard[] {
  let shards = shardLists.get(env);
  if (!shards) {
    shards = Object.entries(env)
      .filter(([binding, value]) => binding.startsWith(SHARD_BINDING_PREFIX) && isD1(value))
      .flatMap(([binding, db]) => {
        const name = shardNameOfBinding(binding);
        return name ? [{ ...shardNamed(name), db: db as D1Database }] : [];
      })
      .sort((a, b) => a.name.localeCompare(b.name));
    shardLists.set(env, shards);
  }
  return shards;
}

function isD1(value: unknown): boolean {
  return typeof value === "object" && value !== null && typeof (value as D1Database).prepare === "function";
}
