/**
 * Where a new receipt goes (docs/api.md#shards), and storing it there: the one operation add
 * calls. A new receipt goes to an open shard, the same one for every retry of one
 * Idempotency-Key (rendezvous hashing), with the key claimed first on the shards whose state
 * changed within the idempotency window, where a call of it in another isolate may go instead
 * (docs/storage.md "One key, one receipt"); a shard whose call failed is passed over for a while.
 */
import { base64url } from "jose";
import { v7 as uuidv7 } from "uuid";
import type { AddResponse } from "../shared/schemas.ts";
import { fnv1a, idOnShard, isShardOpen, type ShardState } from "../shared/shard-ids.ts";
import type { CreationNotice } from "../shared/types.ts";
import {
  IDEMPOTENCY_WINDOW_MS,
  claimKeyAhead,
  completeClaimedAdd,
  earlierAdd,
  replayOfRecord,
  storeReceipt,
  type AddOutcome,
  type FencedReceipt,
  type IdempotencyClaim,
  type KeyRecord,
} from "./receipts.ts";
import { checkShardFill, type FillMemory } from "./shard-fill.ts";
import { shardStates } from "./shard-states.ts";
import { shardOfId, shardsOf, type Shard } from "./shards.ts";
import { isLateEventCommit, onShard } from "./transient.ts";

/** How long an isolate sends no new receipt to a shard whose call failed. */
const FAILING_SHARD_PAUSE_MS = 30_000;

/** How long an add with a key waits, at most, for the call of the same key before it in its isolate. */
export const KEY_WAIT_MS = 5_000;

/**
 * What an isolate remembers for placing receipts: the shard states, their fill, the failing
 * shards, and its adds under way with an Idempotency-Key.
 */
export interface PlacementMemory extends FillMemory {
  /** Until when (epoch ms) each shard whose call failed gets no new receipt, by name. */
  failingUntil: Map<string, number>;
  /** The last add of each client and key that this isolate has under way, by client and key. */
  keysUnderWay: Map<string, Promise<unknown>>;
}

/** A fresh isolate's placement memory: no states read, no shard found full, no shard failing, no add under way. */
export function newPlacementMemory(): PlacementMemory {
  return { fullSince: new Map(), lastAlarm: 0, failingUntil: new Map(), keysUnderWay: new Map() };
}

/** Every shard is closed: a new receipt has nowhere to go. */
export class NoOpenShardError extends Error {
  override name = "NoOpenShardError";
  constructor() {
    super("no open shard: every shard is closed");
  }
}

/** What placing and storing a receipt needs of the Worker beside the request. */
export interface PlacementContext {
  /** The Worker's bindings: its shards (`DB_<NAME>`) and their states. */
  env: { SHARD_STATES: KVNamespace };
  settings: { shardStatesMs: number; shardFillBytes: number };
  memory: PlacementMemory;
  /** Runs work after the response: the fill check. */
  waitUntil: (work: Promise<unknown>) => void;
}

/**
 * A new receipt as the client sent it, with the keyed hash of its app_user_id that erasure fences
 * name; its ID and time are given where it is placed.
 */
export type NewReceipt = Omit<FencedReceipt, "receipt_id" | "created_at">;

/** What became of an add, with the answer it gets. */
export type Stored =
  | { kind: "added"; response: AddResponse; shard: Shard; event: CreationNotice }
  | { kind: "replayed"; response: AddResponse }
  /** Stored and erased at once (an erasure's fence): the answer as if stored, no event to send. */
  | { kind: "erased"; response: AddResponse }
  | { kind: "conflict" };

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
  newEvent: (data: AddResponse["data"], shard: Shard) => CreationNotice,
): Promise<Stored> {
  if (key === undefined) return placeAndStoreOnTime(context, receipt, key, newEvent);
  const underWay = context.memory.keysUnderWay;
  const id = `${receipt.client_id}\n${key}`;
  const before = underWay.get(id);
  const call = (async () => {
    // Whatever became of the call before, this one decides afresh: it is a full request. Its
    // wait is bounded, since the call before never ends if its request was canceled.
    if (before) await Promise.race([before.catch(() => undefined), scheduler.wait(KEY_WAIT_MS)]);
    return placeAndStoreOnTime(context, receipt, key, newEvent);
  })();
  underWay.set(id, call);
  try {
    return await call;
  } finally {
    if (underWay.get(id) === call) underWay.delete(id);
  }
}

// A store whose event would have committed too late for the event feed stored nothing, its key
// record included: placed and stored once more, under fresh IDs and time (on another shard
// without a key, as the first one is now passed over). A second late one fails the add.
async function placeAndStoreOnTime(
  context: PlacementContext,
  receipt: NewReceipt,
  key: string | undefined,
  newEvent: (data: AddResponse["data"], shard: Shard) => CreationNotice,
): Promise<Stored> {
  try {
    return await placeAndStoreNow(context, receipt, key, newEvent);
  } catch (error) {
    if (!isLateEventCommit(error)) throw error;
    return placeAndStoreNow(context, receipt, key, newEvent);
  }
}

async function placeAndStoreNow(
  context: PlacementContext,
  receipt: NewReceipt,
  key: string | undefined,
  newEvent: (data: AddResponse["data"], shard: Shard) => CreationNotice,
): Promise<Stored> {
  // One clock reading for both: the ID's time is created_at (docs/api.md), also when the clock
  // moves on between two readings.
  const now = Date.now();
  const { env, memory, settings } = context;
  const shards = shardsOf(env);
  const states = await shardStates(env.SHARD_STATES, shards, settings.shardStatesMs, memory, now);
  const placement = placeReceipt(shards, states, { key, now, failing: failingShards(memory, now) });
  const fingerprint = key === undefined ? undefined : await requestFingerprint(receipt);
  if (!placement) {
    // A till's retry of an add that went through before the last shard closed still gets its
    // first answer: only a new receipt has nowhere to go.
    const earlier =
      key !== undefined &&
      fingerprint !== undefined &&
      (await earlierAddElsewhere(mayHoldLiveKeys(shards, states, now), { shards, receipt, key, fingerprint, newEvent }, now));
    if (earlier) return earlier;
    throw new NoOpenShardError();
  }
  const { target } = placement;

  const data: AddResponse["data"] = {
    receipt_id: newReceiptId(now, target),
    chain_id: receipt.chain_id,
    client_id: receipt.client_id,
    app_user_id: receipt.app_user_id,
    created_at: new Date(now).toISOString(),
  };
  const response: AddResponse = { data, status: "OK", status_code: 200 };
  const claim = key === undefined || fingerprint === undefined ? undefined : { key, fingerprint, response };
  const event = newEvent(data, target);
  const fencedReceipt = { ...data, body: receipt.body, ...(receipt.format && { format: receipt.format }), user_key: receipt.user_key };
  const keyed = claim && { shards, receipt, key: claim.key, fingerprint: claim.fingerprint, newEvent };
  const outcome: Stored & { sizeAfter?: number } =
    keyed && placement.lookups.length > 0
      ? await claimAheadAndStore(placement, fencedReceipt, keyed)
      : await storedOn(target, await addOnShard(target, fencedReceipt, event, claim, memory), { response, event, keyed });
  if (outcome.sizeAfter !== undefined) {
    context.waitUntil(
      checkShardFill(
        env.SHARD_STATES,
        { shard: target, bytes: outcome.sizeAfter },
        { shards, thresholdBytes: settings.shardFillBytes, now: new Date(now) },
        memory,
      ),
    );
  }
  const { sizeAfter: _size, ...stored } = outcome;
  return stored;
}

/** Makes a receipt's created event, whose event_id names the shard. */
type NewEvent = (data: AddResponse["data"], shard: Shard) => CreationNotice;

/** An add under an Idempotency-Key, as the steps of its rare case need it. */
interface KeyedAdd {
  shards: readonly Shard[];
  receipt: NewReceipt;
  key: string;
  fingerprint: string;
  newEvent: NewEvent;
}

// What an add's one batch on its shard came to, as add answers it.
async function storedOn(
  shard: Shard,
  outcome: AddOutcome & { sizeAfter: number },
  made: { response: AddResponse; event: CreationNotice; keyed: KeyedAdd | undefined },
): Promise<Stored & { sizeAfter: number }> {
  const { sizeAfter } = outcome;
  switch (outcome.kind) {
    case "added":
      return { kind: "added", response: made.response, shard, event: made.event, sizeAfter };
    case "erased":
      return { kind: "erased", response: made.response, sizeAfter };
    case "conflict":
      return { kind: "conflict", sizeAfter };
    case "replayed":
      return { ...(made.keyed ? await madeGood(shard, outcome.response, made.keyed) : outcome), sizeAfter };
  }
}

/**
 * The rare case: a shard other than the target opened or closed within the idempotency window,
 * so a call of this key in an isolate that read the states on the other side of that change may
 * go to one of those shards instead (docs/storage.md "One key, one receipt"). The key is claimed
 * on each of them first, in the key's order: each claim is a write, which D1 runs one at a time
 * with the other call's on that shard, so the first to claim wins there and the other finds its
 * record and gives its answer. Then the receipt goes to the target, only where no call has
 * recorded the key yet. One round trip per shard claimed, plus the target's.
 */
async function claimAheadAndStore(placement: Placement, receipt: FencedReceipt, keyed: KeyedAdd): Promise<Stored & { sizeAfter?: number }> {
  const response: AddResponse = { data: receiptData(receipt), status: "OK", status_code: 200 };
  const claim = { key: keyed.key, fingerprint: keyed.fingerprint, response };
  for (const shard of placement.lookups) {
    const record = await onShard(shard.name, () => claimKeyAhead(shard.db, receipt, claim));
    if (record.receipt_id !== receipt.receipt_id) return earlierAnswer(shard, record, keyed);
  }
  const { target } = placement;
  const event = keyed.newEvent(response.data, target);
  const { sizeAfter, ...record } = await onShard(target.name, () => completeClaimedAdd(target.db, receipt, event, claim));
  if (record.receipt_id !== receipt.receipt_id) return { ...(await earlierAnswer(target, record, keyed)), sizeAfter };
  // Stored now, or by a call that made this one's claim good first: the answer is the same.
  if (record.erased_at !== null) return { kind: "erased", response, sizeAfter };
  return { kind: "added", response, shard: target, event, sizeAfter };
}

function receiptData({ receipt_id, chain_id, client_id, app_user_id, created_at }: FencedReceipt): AddResponse["data"] {
  return { receipt_id, chain_id, client_id, app_user_id, created_at };
}

// The answer of the call that recorded the key first: a conflict for another request, else its
// answer, made good where it was claimed ahead.
async function earlierAnswer(shard: Shard, record: KeyRecord, keyed: KeyedAdd, hops = 0): Promise<Stored> {
  if (record.fingerprint !== keyed.fingerprint) return { kind: "conflict" };
  const replay = replayOfRecord(record, keyed.receipt.app_user_id);
  return record.erased_at === null ? madeGood(shard, replay.response, keyed, hops) : replay;
}

/**
 * How many shards a replay follows claims made ahead across: the shard the receipt's ID names, and
 * once more after two crossed claims were settled there.
 */
const MAX_CLAIM_HOPS = 2;

/**
 * A first answer found on `shard` whose receipt another shard holds, or should: its call claimed
 * the key ahead here and may have stopped before it stored the receipt. Stores it there as that
 * call would have (only where that shard holds no live record of the key, so never twice and
 * never again after a delete), then answers as that shard's record says.
 */
async function madeGood(shard: Shard, response: AddResponse, keyed: KeyedAdd, hops = 0): Promise<Stored> {
  const holder = shardOfId(keyed.shards, response.data.receipt_id);
  if (!holder || holder === shard) return { kind: "replayed", response };
  if (hops >= MAX_CLAIM_HOPS) throw new Error("the key's claims made ahead lead on past the shard its receipt names; nothing stored");
  const data = { ...response.data, app_user_id: keyed.receipt.app_user_id };
  const record = await storeOrOwn(holder, data, keyed);
  const crossed =
    record.receipt_id !== data.receipt_id &&
    record.erased_at === null &&
    record.fingerprint === keyed.fingerprint &&
    shardOfId(keyed.shards, record.receipt_id) === shard;
  if (!crossed) return earlierAnswer(holder, record, keyed, hops + 1);
  // Two calls that saw a shard's state on either side of a change each claimed the key ahead on
  // the other's shard before either stored: each record names a receipt that only the other's
  // shard could hold, and neither can be stored there. The claim on the shard ranked first in the
  // key's order wins, the same in every isolate; the other gives way to its receipt.
  const [winner, loser] = ranksBefore(keyed.key, shard, holder)
    ? [{ data, on: shard }, { receiptId: record.receipt_id, on: holder }]
    : [{ data: replayOfRecord(record, keyed.receipt.app_user_id).response.data, on: holder }, { receiptId: data.receipt_id, on: shard }];
  const settled = await storeOrOwn(loser.on, winner.data, keyed, loser.receiptId);
  return earlierAnswer(loser.on, settled, keyed, hops + 1);
}

/**
 * Stores the receipt `data` names on `holder` as {@link completeOn} does. Its event would commit too
 * late for the feed (migration 0018) when the claim is older than that: no call can store its
 * receipt any more, so none was ever answered with it, and this call stores a receipt of its own
 * there instead, under the same rule: whichever call's record that shard holds first is the key's
 * answer for every call after.
 */
async function storeOrOwn(holder: Shard, data: AddResponse["data"], keyed: KeyedAdd, givingWay?: string): Promise<KeyRecord> {
  try {
    return await completeOn(holder, data, keyed, givingWay);
  } catch (error) {
    if (!isLateEventCommit(error)) throw error;
    const now = Date.now();
    return completeOn(holder, { ...data, receipt_id: newReceiptId(now, holder), created_at: new Date(now).toISOString() }, keyed, givingWay);
  }
}

// Stores the receipt `data` names on `holder` with its key record, only where `holder` holds no
// live record of the key (once the claim `givingWay` is removed); returns the record it holds.
async function completeOn(holder: Shard, data: AddResponse["data"], keyed: KeyedAdd, givingWay?: string): Promise<KeyRecord> {
  const receipt = { ...data, body: keyed.receipt.body, ...(keyed.receipt.format && { format: keyed.receipt.format }), user_key: keyed.receipt.user_key };
  const claim = { key: keyed.key, fingerprint: keyed.fingerprint, response: { data, status: "OK" as const, status_code: 200 as const } };
  return onShard(holder.name, () => completeClaimedAdd(holder.db, receipt, keyed.newEvent(data, holder), claim, givingWay));
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

// Whether `a` comes before `b` in the key's rendezvous order; by name where the scores tie, which
// placement leaves to the configuration's order: any order every isolate agrees on settles crossed claims.
function ranksBefore(key: string, a: Shard, b: Shard): boolean {
  const [scoreA, scoreB] = [rendezvousScore(key, a.name), rendezvousScore(key, b.name)];
  return scoreA !== scoreB ? scoreA > scoreB : a.name < b.name;
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

// Shards whose calls failed within the pause, by name.
function failingShards(memory: PlacementMemory, now: number): Set<string> {
  return new Set([...memory.failingUntil].filter(([, until]) => until > now).map(([name]) => name));
}

// A shard that opened or closed within the idempotency window may hold this key's first call
// (placeReceipt); in the steady state there is none to ask.
async function earlierAddElsewhere(shards: readonly Shard[], keyed: KeyedAdd, now: number): Promise<Stored | undefined> {
  const { client_id, app_user_id } = keyed.receipt;
  for (const shard of shards) {
    const earlier = await onShard(shard.name, () => earlierAdd(shard.db, client_id, app_user_id, keyed, new Date(now)));
    if (earlier?.kind === "conflict") return earlier;
    if (earlier?.kind === "replayed") return madeGood(shard, earlier.response, keyed);
  }
  return undefined;
}

// A shard whose call fails is passed over by this isolate for a while, so that new receipts go
// to the other open shards while it recovers.
async function addOnShard(
  shard: Shard,
  receipt: FencedReceipt,
  event: CreationNotice,
  claim: IdempotencyClaim | undefined,
  memory: PlacementMemory,
): Promise<AddOutcome & { sizeAfter: number }> {
  try {
    return await onShard(shard.name, () => storeReceipt(shard.db, receipt, event, claim));
  } catch (error) {
    memory.failingUntil.set(shard.name, Date.now() + FAILING_SHARD_PAUSE_MS);
    throw error;
  }
}

// UUIDv7: the time in front keeps inserts at the end of the primary key's b-tree. uuid's default
// spends 31 of the random bits on a counter within one millisecond, which makes neighbouring IDs
// partly predictable; fresh random bits for every ID keep them unguessable: the 62 of rand_b, as
// rand_a carries the shard's tag.
function newReceiptId(msecs: number, shard: Shard): string {
  return idOnShard(uuidv7({ msecs, random: crypto.getRandomValues(new Uint8Array(16)) }), shard);
}

// Everything that decides what a retry would store: the client is part of the key already, and
// Authorization changes when a token is renewed, so neither belongs here. Header values are
// printable ASCII, so a line feed separates the parts unambiguously without escaping a 40 KB body.
// A body in a published format names it before the body: the same text read as DR Retail v1.0
// and as v1.1 are different requests. A body of ours begins with white space or `{`, never with a
// format's name, so its fingerprint stays what it was.
async function requestFingerprint(receipt: NewReceipt): Promise<string> {
  const format = receipt.format ? `${receipt.format.name}\n` : "";
  const request = `${receipt.chain_id}\n${receipt.app_user_id}\n${format}${receipt.body}`;
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(request));
  return base64url.encode(new Uint8Array(digest));
}
