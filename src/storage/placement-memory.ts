/**
 * What placing and storing a receipt keep and need beside the request: an isolate's placement
 * memory and the Worker's context. Apart from src/storage/placement.ts, which decides, and
 * src/storage/receipts.ts, which carries the decision out, so that both read it downward.
 */
import type { FillMemory } from "./shard-fill.ts";

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

/** What placing and storing a receipt needs of the Worker beside the request. */
export interface PlacementContext {
  /** The Worker's bindings: its shards (`DB_<NAME>`) and their states. */
  env: { SHARD_STATES: KVNamespace };
  settings: { shardStatesMs: number; shardFillBytes: number };
  memory: PlacementMemory;
  /** Runs work after the response: the fill check. */
  waitUntil: (work: Promise<unknown>) => void;
}

