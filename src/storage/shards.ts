/**
 * Which shard a call goes to (docs/api.md#shards): the one module that decides. A receipt's or an
 * event's ID names its shard; a new receipt goes to an open shard, the same one for every retry
 * of one Idempotency-Key (rendezvous hashing), with a look at the shards whose state changed
 * within the idempotency window, where a first call may have gone instead.
 */
import {
  SHARD_BINDING_PREFIX,
  shardNameOfBinding,
  shardTag,
  stampShardTag,
  tagOfId,
  type ShardState,
} from "../shared/shard-ids.ts";
import { IDEMPOTENCY_WINDOW_MS } from "./receipts.ts";

/** One D1 database holding a share of the receipts. */
export interface Shard {
  name: string;
  binding: string;
  tag: number;
  db: D1Database;
}

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
        return name ? [{ name, binding, tag: shardTag(name), db: db as D1Database }] : [];
      })
      .sort((a, b) => a.name.localeCompare(b.name));
    shardLists.set(env, shards);
  }
  return shards;
}

/** The shard an ID names, or undefined when it names none (an unknown ID, like any other). */
export function shardOfId(shards: readonly Shard[], id: string): Shard | undefined {
  const tag = tagOfId(id);
  return tag === undefined ? undefined : shards.find((shard) => shard.tag === tag);
}

/** A fresh UUIDv7 made to live on `shard`. */
export function idOnShard(uuid: string, shard: Shard): string {
  return stampShardTag(uuid, shard.tag);
}

/** Where a new receipt goes, and where an earlier call with its key may have gone instead. */
export interface Placement {
  target: Shard;
  /** Shards to ask for the key first; empty in the steady state (no change within 24 hours). */
  lookups: Shard[];
}

/**
 * Places a new receipt. Without a key: a random open shard that is not failing. With a key: the
 * first open shard in the key's rendezvous order, so every retry lands there; and, since a
 * shard that opened or closed within the idempotency window may have taken or lost the key's
 * first call, every such shard ranked before the first one that stayed open all along is
 * looked up first. Returns undefined when no shard is open.
 */
export function placeReceipt(
  shards: readonly Shard[],
  states: ReadonlyMap<string, ShardState>,
  options: { key?: string; now: number; failing: ReadonlySet<string> },
): Placement | undefined {
  const isOpen = (shard: Shard) => (states.get(shard.name)?.state ?? "open") === "open";
  if (options.key === undefined) {
    const open = shards.filter(isOpen);
    const healthy = open.filter((shard) => !options.failing.has(shard.name));
    const pool = healthy.length > 0 ? healthy : open;
    const target = pool[Math.floor(Math.random() * pool.length)];
    return target && { target, lookups: [] };
  }
  const key = options.key;
  const ranked = shards
    .map((shard) => ({ shard, score: rendezvousScore(key, shard.name) }))
    .sort((a, b) => b.score - a.score)
    .map(({ shard }) => shard);
  const target = ranked.find(isOpen);
  if (!target) return undefined;
  const lookups: Shard[] = [];
  for (const shard of ranked) {
    const changedAt = Date.parse(states.get(shard.name)?.changed_at ?? "");
    const openAllAlong = isOpen(shard) && !(options.now - changedAt < IDEMPOTENCY_WINDOW_MS);
    // A shard closed for longer than the window holds no live key; any other may hold this one.
    if (shard !== target && (openAllAlong || options.now - changedAt < IDEMPOTENCY_WINDOW_MS)) lookups.push(shard);
    if (openAllAlong) break;
  }
  return { target, lookups };
}

// A 32-bit FNV-1a of key and shard, mixed so that every bit depends on every input bit: the
// order it gives the shards is as good as random and the same in every isolate.
function rendezvousScore(key: string, shardName: string): number {
  const text = `${key}\n${shardName}`;
  let hash = 0x811c9dc5;
  for (let i = 0; i < text.length; i += 1) {
    hash ^= text.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193);
  }
  hash ^= hash >>> 16;
  hash = Math.imul(hash, 0x85ebca6b);
  hash ^= hash >>> 13;
  hash = Math.imul(hash, 0xc2b2ae35);
  hash ^= hash >>> 16;
  return hash >>> 0;
}

function isD1(value: unknown): boolean {
  return typeof value === "object" && value !== null && typeof (value as D1Database).prepare === "function";
}

/** How long an isolate sends no new receipt to a shard whose call failed. */
const FAILING_SHARD_PAUSE_MS = 30_000;

const failingUntil = new Map<string, number>();

/** Records that a call to this shard failed: new receipts go elsewhere for a while. */
export function noteShardFailure(shard: Shard, now = Date.now()): void {
  failingUntil.set(shard.name, now + FAILING_SHARD_PAUSE_MS);
}

/** Shards whose calls failed within the pause, by name. */
export function failingShards(now = Date.now()): Set<string> {
  return new Set([...failingUntil].filter(([, until]) => until > now).map(([name]) => name));
}

/**
 * The shard an event's ID names. Throws when none does, which only a shard's binding removed
 * while its events were on their way can cause: the caller retries until the binding is back.
 */
export function shardOfEvent(env: object, eventId: string): Shard {
  const shard = shardOfId(shardsOf(env), eventId);
  if (!shard) throw new Error(`event_id names no shard of this Worker: ${eventId}`);
  return shard;
}
