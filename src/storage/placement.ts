/**
 * Where a new receipt goes (docs/api.md#shards): the one operation add calls, and the one place
 * that decides which shards an add touches. A new receipt goes to an open shard, the same one for
 * every retry of one Idempotency-Key (rendezvous hashing), with the key claimed first on the
 * shards whose state changed within the idempotency window, where a call of it in another isolate
 * may go instead (docs/storage.md "One key, one receipt"); a shard whose call failed is passed
 * over for a while. The decision is a plain plan ({@link planAdd}), which src/storage/receipts.ts
 * carries out.
 */
import { base64url } from "jose";
import { fnv1a, isShardOpen, type ShardState } from "../shared/shard-ids.ts";
import { answerOf, claimAhead, earlierAnswer } from "./key-claims.ts";
import { IDEMPOTENCY_WINDOW_MS, NoOpenShardError, receiptOn, storeReceipt, type Add, type AddPlan, type NewEvent, type NewReceipt, type Stored } from "./receipts.ts";
import { checkShardFill } from "./shard-fill.ts";
import { isLateEventCommit } from "./transient.ts";
import type { PlacementContext } from "./placement-memory.ts";
import { shardStates } from "./shard-states.ts";
import { shardsOf, type Shard } from "./shards.ts";

// Add's route names these here, where it calls storage.
export { NoOpenShardError, type NewReceipt, type Stored } from "./receipts.ts";
export { newPlacementMemory, type PlacementContext, type PlacementMemory } from "./placement-memory.ts";

/** How long an add with a key waits, at most, for the call of the same key before it in its isolate. */
export const KEY_WAIT_MS = 5_000;

/**
 * Places a new receipt on a shard and stores it there with its created event and, under an
 * Idempotency-Key, its key record; a retry of the key gets the first call's answer from
 * whichever shard holds it, also when every shard has closed since. Throws
 * {@link NoOpenShardError} when every shard is closed and the add is not such a retry.
 *
 * Calls of one key store one receipt in any isolates at any time (docs/storage.md "One key, one
 * receipt"). Calls of one client and key still run one after another in an isolate, which only
 * spares the second the work of meeting the first's record.
 *
 * @param newEvent makes the receipt's created event, whose event_id names the shard.
 * @example const stored = await placeAndStore(context, { chain_id, client_id, app_user_id, body }, key, newCreationNotice);
 */
export async function placeAndStore(
  context: PlacementContext,
  receipt: NewReceipt,
  key: string | undefined,
  newEvent: NewEvent,
): Promise<Stored> {
  if (key === undefined) return storeAsPlanned(await planAdd(context, receipt, key), receipt, newEvent, context);
  const underWay = context.memory.keysUnderWay;
  const id = `${receipt.client_id}\n${key}`;
  const before = underWay.get(id);
  const call = (async () => {
    // Whatever became of the call before, this one decides afresh: it is a full request. Its
    // wait is bounded, since the call before never ends if its request was canceled.
    if (before) await Promise.race([before.catch(() => undefined), scheduler.wait(KEY_WAIT_MS)]);
    return storeAsPlanned(await planAdd(context, receipt, key), receipt, newEvent, context);
  })();
  underWay.set(id, call);
  try {
    return await call;
  } finally {
    if (underWay.get(id) === call) underWay.delete(id);
  }
}

/**
 * The plan of one add, decided once from the shard states this isolate holds: its target (none
 * when every shard is closed), where it goes again under fresh IDs should its event commit too
 * late there (without a key another shard, as for a failing one), and with a key, the key's
 * order, the request's fingerprint, and the shards to claim the key on first; with every shard
 * closed, those that may hold the key's earlier add.
 */
export async function planAdd(context: PlacementContext, receipt: NewReceipt, key: string | undefined): Promise<AddPlan> {
  const now = Date.now();
  const { env, memory, settings } = context;
  const shards = shardsOf(env);
  const states = await shardStates(env.SHARD_STATES, shards, settings.shardStatesMs, memory, now);
  // Shards whose calls failed within the pause, by name.
  const failing = new Set([...memory.failingUntil].filter(([, until]) => until > now).map(([name]) => name));
  if (key === undefined) {
    const target = placeReceipt(shards, states, { now, failing })?.target;
    const again = target && placeReceipt(shards, states, { now, failing: failing.add(target.name) })!.target;
    return { shards, target, again };
  }
  const placement = placeReceipt(shards, states, { key, now, failing });
  const ahead = placement?.lookups ?? mayHoldLiveKeys(shards, states, now);
  const fingerprint = await requestFingerprint(receipt);
  return { shards: keyOrder(key, shards), target: placement?.target, again: placement?.target, keyed: { key, fingerprint, ahead } };
}

/** Where a new receipt goes, and where an earlier call with its key may have gone instead. */
export interface Placement {
  target: Shard;
  /** Shards to claim the key on first, in the key's order; empty in the steady state (no change within 24 hours). */
  lookups: Shard[];
}

/**
 * Places a new receipt. Without a key: a random open shard that is not failing. With a key: the
 * first open shard in the key's rendezvous order, so every retry lands there; and, since a
 * shard that opened or closed within the idempotency window may have taken or lost the key's
 * first call, or take a racing one in an isolate that saw the other side of the change, every
 * other shard of that order up to the first one that stayed open all along is claimed first.
 * Returns undefined when no shard is open.
 */
export function placeReceipt(
  shards: readonly Shard[],
  states: ReadonlyMap<string, ShardState>,
  options: { key?: string; now: number; failing: ReadonlySet<string> },
): Placement | undefined {
  const isOpen = (shard: Shard) => isShardOpen(states, shard.name);
  if (options.key === undefined) {
    const open = shards.filter(isOpen);
    const healthy = open.filter((shard) => !options.failing.has(shard.name));
    const pool = healthy.length > 0 ? healthy : open;
    const target = pool[Math.floor(Math.random() * pool.length)];
    return target && { target, lookups: [] };
  }
  const ranked = keyOrder(options.key, shards);
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

// The shards in the key's rendezvous order; by name where the scores tie, which placement leaves
// to the configuration's order: any order every isolate agrees on settles crossed claims.
function keyOrder(key: string, shards: readonly Shard[]): Shard[] {
  return shards
    .map((shard) => ({ shard, score: rendezvousScore(key, shard.name) }))
    .sort((a, b) => b.score - a.score || (a.shard.name < b.shard.name ? -1 : 1))
    .map(({ shard }) => shard);
}

// FNV-1a of key and shard, mixed so that every bit depends on every input bit: the order it
// gives the shards is as good as random and the same in every isolate.
function rendezvousScore(key: string, shardName: string): number {
  let hash = fnv1a(`${key}\n${shardName}`);
  hash ^= hash >>> 16;
  hash = Math.imul(hash, 0x85ebca6b);
  hash ^= hash >>> 13;
  hash = Math.imul(hash, 0xc2b2ae35);
  hash ^= hash >>> 16;
  return hash >>> 0;
}

// With every shard closed: the shards that closed within the idempotency window (or at a time
// not recorded), the only ones that may hold a live key.
function mayHoldLiveKeys(shards: readonly Shard[], states: ReadonlyMap<string, ShardState>, now: number): Shard[] {
  return shards.filter((shard) => !(now - Date.parse(states.get(shard.name)?.changed_at ?? "") >= IDEMPOTENCY_WINDOW_MS));
}

// Everything that decides what a retry would store: the client is part of the key already, and
// Authorization changes when a token is renewed, so neither belongs here. Header values are
// printable ASCII, so a line feed separates the parts unambiguously without escaping a 40 KB body.
// A body in a published format names it before the body: the same text read as DR Retail v1.0
// and as v1.1 are different requests. A body of ours begins with white space or `{`, never with a
// format's name, so its fingerprint stays what it was.
export async function requestFingerprint(receipt: Pick<NewReceipt, "chain_id" | "app_user_id" | "body" | "format">): Promise<string> {
  const format = receipt.format ? `${receipt.format.name}\n` : "";
  const request = `${receipt.chain_id}\n${receipt.app_user_id}\n${format}${receipt.body}`;
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(request));
  return base64url.encode(new Uint8Array(digest));
}

/** How long an isolate sends no new receipt to a shard whose call failed. */
const FAILING_SHARD_PAUSE_MS = 30_000;

/**
 * Carries out an add's plan: stores the receipt on the target, in the common case in one D1
 * round trip, the target's batch ({@link storeOn}). A store whose event would have committed too
 * late for the event feed stored nothing, its key record included: it is made once more under
 * fresh IDs and time, on the plan's `again`. With no target, asks the planned shards for the
 * key's earlier add (src/storage/key-claims.ts `earlierAnswer`; throws {@link NoOpenShardError}
 * when none holds one).
 *
 * @param context the isolate's memory, which notes a failing target, and the fill check's needs.
 */
async function storeAsPlanned(plan: AddPlan, receipt: NewReceipt, newEvent: NewEvent, context: PlacementContext): Promise<Stored> {
  const add: Add = { plan, receipt, newEvent };
  const { target } = plan;
  if (target) {
    try {
      return await storeOn(add, target, context);
    } catch (error) {
      if (!isLateEventCommit(error)) throw error;
      return storeOn(add, plan.again ?? target, context);
    }
  }
  // A till's retry of an add that went through before the last shard closed still gets its
  // first answer: only a new receipt has nowhere to go.
  const earlier = await earlierAnswer(add);
  if (earlier) return earlier;
  throw new NoOpenShardError();
}

/**
 * Stores the receipt on the target in one batch ({@link storeReceipt}), the common case. Only
 * where the plan names shards to claim the key on first (a shard of the key's order opened or
 * closed within the idempotency window) are those claims made before, each a batch of its own
 * (src/storage/key-claims.ts `claimAhead`), and the receipt then goes to the target only where no
 * call has recorded the key yet. A shard whose batch failed is passed over by this isolate for a
 * while, so that new receipts go to the other open shards while it recovers.
 */
async function storeOn(add: Add, target: Shard, context: PlacementContext): Promise<Stored> {
  const own = receiptOn(add, target);
  const ahead = add.plan.keyed?.ahead ?? [];
  if (ahead.length > 0) {
    const answer = await claimAhead(add, own, ahead);
    if (answer) return answer;
  }
  const claim = own.claim && ahead.length > 0 ? { ...own.claim, claimedAhead: {} } : own.claim;
  const stored = await storeReceipt(target, own.row, own.event, claim).catch((error: unknown) => {
    context.memory.failingUntil.set(target.name, Date.now() + FAILING_SHARD_PAUSE_MS);
    throw error;
  });
  const { env, memory, settings, waitUntil } = context;
  waitUntil(
    checkShardFill(env.SHARD_STATES, { shard: target, bytes: stored.sizeAfter }, { shards: add.plan.shards, thresholdBytes: settings.shardFillBytes, now: new Date(own.row.created_at) }, memory),
  );
  // The target's record may be another call's: its answer.
  if (stored.record && stored.record.receipt_id !== own.row.receipt_id) return answerOf(add, stored.record, target);
  return stored.kind === "added" ? { kind: "added", response: own.response, shard: target, event: own.event } : { kind: "erased", response: own.response };
}
