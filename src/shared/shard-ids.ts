/**
 * What a shard is, how it is named, how an ID names its shard, and whether it is open
 * (docs/api.md#shards): the one home of these facts, asked by both Workers, the operator scripts
 * and the soak, so it stays free of Workers types.
 *
 * Every ID the service makes (receipt_id, event_id) is a UUIDv7 whose 12 `rand_a` bits hold the
 * tag of the shard it lives on: `019aa8a4-3c1e-7TTT-...`. The ID stays a UUIDv7, time-ordered,
 * with the 62 random bits of `rand_b` left unguessable, and delete finds the receipt's database
 * without a lookup.
 */

/**
 * A shard as every part of the service knows it: its name, its D1 binding and the tag its IDs
 * carry. A Worker's shard adds its database (src/storage/shards.ts), a config's its database's
 * name and id (scripts/lib/shards.ts).
 */
export interface ShardBase {
  name: string;
  binding: string;
  tag: number;
}

/** The shard of this name. */
export function shardNamed(name: string): ShardBase {
  return { name, binding: shardBinding(name), tag: shardTag(name) };
}

/**
 * The shard an ID (receipt_id, event_id) names among these, or undefined when it names none,
 * which callers treat like any unknown ID.
 */
export function shardOfId<S extends ShardBase>(shards: readonly S[], id: string): S | undefined {
  const tag = tagOfId(id);
  return tag === undefined ? undefined : shards.find((shard) => shard.tag === tag);
}

/** A fresh UUIDv7 made to live on `shard`: its `rand_a` bits replaced by the shard's tag. */
export function idOnShard(uuid: string, shard: ShardBase): string {
  return stampShardTag(uuid, shard.tag);
}

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
  const hash = fnv1a(name);
  return ((hash >>> 12) ^ hash) & 0xfff;
}

/**
 * 32-bit FNV-1a of a text's UTF-16 code units: cheap, and the same in every isolate and script,
 * which is all a shard's tag and its rendezvous rank need.
 */
export function fnv1a(text: string): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < text.length; i += 1) {
    hash ^= text.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193) >>> 0;
  }
  return hash;
}

/** A UUIDv7 in its canonical lower-case form: the form of every ID the service makes. */
export const UUID_V7_PATTERN = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

/** The shard tag an ID carries, or undefined for text that is not a UUIDv7. */
export function tagOfId(id: string): number | undefined {
  return UUID_V7_PATTERN.test(id) ? Number.parseInt(id.slice(15, 18), 16) : undefined;
}

/** The time a UUIDv7 was made, in ms since the epoch: its first 48 bits. */
export function timeOfId(id: string): number {
  return Number.parseInt(id.slice(0, 8) + id.slice(9, 13), 16);
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
  /**
   * Set by the fill check when the shard passed the fill threshold (its size then, and when):
   * a full shard is no room for another one to close into. An operator's open or close clears it.
   */
  full?: { bytes: number; at: string };
}

/** Whether a shard takes new receipts: open unless its state says closed. */
export function isShardOpen(states: ReadonlyMap<string, ShardState>, name: string): boolean {
  return (states.get(name)?.state ?? "open") === "open";
}

/** KV key of a shard's state. */
export function shardStateKey(name: string): string {
  return `shard:${name}`;
}
