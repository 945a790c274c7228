/**
 * How a shard is named, how an ID names its shard, and how its state is kept
 * (docs/api.md#shards). Shared by both Workers and the operator scripts, so it stays free of
 * Workers types.
 *
 * Every ID the service makes (receipt_id, event_id) is a UUIDv7 whose 12 `rand_a` bits hold the
 * tag of the shard it lives on: `019aa8a4-3c1e-7TTT-...`. The ID stays a UUIDv7, time-ordered,
 * with the 62 random bits of `rand_b` left unguessable, and delete finds the receipt's database
 * without a lookup.
 */

/** A shard's name: a lower-case letter, then up to 19 lower-case letters or digits. */
export const SHARD_NAME_PATTERN = /^[a-z][a-z0-9]{0,19}$/;

/** Prefix of every shard's D1 binding: shard `s1` is bound as `DB_S1` in both Workers. */
export const SHARD_BINDING_PREFIX = "DB_";

/** The D1 binding of a shard. */
export function shardBinding(name: string): string {
  return SHARD_BINDING_PREFIX + name.toUpperCase();
}

/** The shard a binding name stands for, or undefined for any other binding. */
export function shardNameOfBinding(binding: string): string | undefined {
  if (!binding.startsWith(SHARD_BINDING_PREFIX)) return undefined;
  const name = binding.slice(SHARD_BINDING_PREFIX.length).toLowerCase();
  return SHARD_NAME_PATTERN.test(name) && shardBinding(name) === binding ? name : undefined;
}

/**
 * The 12-bit tag of a shard, from its name (FNV-1a, folded). Two shards must not share a tag:
 * `npm run shards -- add` refuses a name whose tag is taken.
 */
export function shardTag(name: string): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < name.length; i += 1) {
    hash ^= name.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193) >>> 0;
  }
  return ((hash >>> 12) ^ hash) & 0xfff;
}

const UUID_V7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

/** The shard tag an ID carries, or undefined for text that is not a UUIDv7. */
export function tagOfId(id: string): number | undefined {
  return UUID_V7.test(id) ? Number.parseInt(id.slice(15, 18), 16) : undefined;
}

/** A UUIDv7 with its `rand_a` bits replaced by a shard's tag. */
export function stampShardTag(uuid: string, tag: number): string {
  return `${uuid.slice(0, 15)}${tag.toString(16).padStart(3, "0")}${uuid.slice(18)}`;
}

/**
 * A shard's state in the SHARD_STATES KV namespace, as operators (`npm run shards`) and the fill
 * check write it; no record means open since the shard was first deployed.
 */
export interface ShardState {
  state: "open" | "closed";
  /** ISO time of the last change. */
  changed_at?: string;
  /** Who made the change: `operator`, or `fill` when the shard closed itself. */
  by?: string;
}

/** KV key of a shard's state. */
export function shardStateKey(name: string): string {
  return `shard:${name}`;
}
