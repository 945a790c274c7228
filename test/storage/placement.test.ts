/**
 * Placement of a new receipt (docs/api.md#shards), called directly: the rendezvous order of a
 * key, the shards looked up for a key when states changed within the idempotency window, failing
 * shards passed over, and the one operation add calls.
 */
import { env } from "cloudflare:workers";
import { v7 as uuidv7 } from "uuid";
import { describe, expect, it } from "vitest";
import { newCreationNotice } from "../../src/api/events.ts";
import { EVENT_COMMIT_SECONDS } from "../../src/shared/config.ts";
import type { AddResponse } from "../../src/shared/schemas.ts";
import { idOnShard, shardOfId, shardStateKey, type ShardState } from "../../src/shared/shard-ids.ts";
import type { CreationNotice } from "../../src/shared/types.ts";
import {
  KEY_WAIT_MS,
  NoOpenShardError,
  newPlacementMemory,
  placeAndStore,
  placeReceipt,
  requestFingerprint,
  type NewReceipt,
  type PlacementContext,
  type PlacementMemory,
} from "../../src/storage/placement.ts";
import { writeFence } from "../../src/storage/fences.ts";
import { IDEMPOTENCY_WINDOW_MS, claimKey } from "../../src/storage/receipts.ts";
import type { Shard } from "../../src/storage/shards.ts";
import { runBatch } from "../../src/storage/statement.ts";
import { uniqueId } from "../support/api.ts";
import { SHARDS, receiptsOf, rowsOnEveryShard } from "../support/shards.ts";

const NOW = Date.parse("2026-11-20T12:00:00.000Z");
const HOUR_MS = 60 * 60 * 1000;
const NO_FAILURES: ReadonlySet<string> = new Set();

/** A shard's state as it was changed `agoMs` before NOW. */
function changed(state: ShardState["state"], agoMs: number): ShardState {
  return { state, changed_at: new Date(NOW - agoMs).toISOString(), by: "operator" };
}

/** The shards in a key's rendezvous order, read off placement by closing them one after another. */
function rankOf(key: string): Shard[] {
  const states = new Map<string, ShardState>();
  const ranked: Shard[] = [];
  for (let placement = placeReceipt(SHARDS, states, { key, now: NOW, failing: NO_FAILURES }); placement; ) {
    ranked.push(placement.target);
    states.set(placement.target.name, changed("closed", 2 * IDEMPOTENCY_WINDOW_MS));
    placement = placeReceipt(SHARDS, states, { key, now: NOW, failing: NO_FAILURES });
  }
  return ranked;
}

describe("placement: the rendezvous order of an Idempotency-Key", () => {
  it("every retry of a key goes to the same shard, and keys spread over every shard", () => {
    const firsts = new Set<string>();
    for (let i = 0; i < 60; i += 1) {
      const key = `key-${i}`;
      const first = placeReceipt(SHARDS, new Map(), { key, now: NOW, failing: NO_FAILURES });
      const again = placeReceipt(SHARDS, new Map(), { key, now: NOW + HOUR_MS, failing: NO_FAILURES });
      expect(again).toEqual(first);
      expect(first!.lookups).toEqual([]);
      firsts.add(first!.target.name);
    }
    expect([...firsts].sort()).toEqual(SHARDS.map((shard) => shard.name));
  });

  it("a key goes to the first open shard of its order, whatever the failing shards", () => {
    const [first, second] = rankOf("key-order");
    const states = new Map([[first!.name, changed("closed", 2 * IDEMPOTENCY_WINDOW_MS)]]);
    const failing = new Set([second!.name]);
    expect(placeReceipt(SHARDS, states, { key: "key-order", now: NOW, failing })!.target).toBe(second);
  });
});

describe("placement: shards looked up for a key when states changed within the idempotency window", () => {
  const key = "key-lookups";

  it("a shard that closed within the window, ranked first, is looked up; one closed longer ago is not", () => {
    const [first, second] = rankOf(key);
    const recent = placeReceipt(SHARDS, new Map([[first!.name, changed("closed", HOUR_MS)]]), { key, now: NOW, failing: NO_FAILURES });
    expect(recent).toEqual({ target: second, lookups: [first] });
    const old = placeReceipt(SHARDS, new Map([[first!.name, changed("closed", 2 * IDEMPOTENCY_WINDOW_MS)]]), {
      key,
      now: NOW,
      failing: NO_FAILURES,
    });
    expect(old).toEqual({ target: second, lookups: [] });
  });

  it("a shard that opened within the window takes the key, and the next shard open all along is looked up", () => {
    const [first, second] = rankOf(key);
    const placement = placeReceipt(SHARDS, new Map([[first!.name, changed("open", HOUR_MS)]]), { key, now: NOW, failing: NO_FAILURES });
    expect(placement).toEqual({ target: first, lookups: [second] });
  });

  it("lookups stop at the first shard open all along", () => {
    const [first, second, third] = rankOf(key);
    const states = new Map([
      [first!.name, changed("closed", HOUR_MS)],
      [second!.name, changed("open", HOUR_MS)],
    ]);
    expect(placeReceipt(SHARDS, states, { key, now: NOW, failing: NO_FAILURES })).toEqual({
      target: second,
      lookups: [first, third],
    });
  });
});

describe("placement: without a key", () => {
  it("failing shards are passed over while another shard is open, and used when none is", () => {
    const [healthy, ...failingShards] = SHARDS;
    const failing = new Set(failingShards.map((shard) => shard.name));
    for (let i = 0; i < 20; i += 1) {
      expect(placeReceipt(SHARDS, new Map(), { now: NOW, failing })!.target).toBe(healthy);
    }
    const everyShard = new Set(SHARDS.map((shard) => shard.name));
    expect(everyShard.has(placeReceipt(SHARDS, new Map(), { now: NOW, failing: everyShard })!.target.name)).toBe(true);
  });

  it("with every shard closed there is no placement", () => {
    const states = new Map(SHARDS.map((shard) => [shard.name, changed("closed", HOUR_MS)]));
    expect(placeReceipt(SHARDS, states, { now: NOW, failing: NO_FAILURES })).toBeUndefined();
    expect(placeReceipt(SHARDS, states, { key: "key-closed", now: NOW, failing: NO_FAILURES })).toBeUndefined();
  });
});

describe("placeAndStore", () => {
  /** A context over the test run's bindings, its memory fresh unless given, its deferred work collected. */
  function contextOf(bindings: object = env, memory: PlacementMemory = newPlacementMemory()) {
    const deferred: Promise<unknown>[] = [];
    const context: PlacementContext = {
      env: bindings as PlacementContext["env"],
      settings: { shardStatesMs: 0, shardFillBytes: 9e9 },
      memory,
      waitUntil: (work) => deferred.push(work),
    };
    return { context, settled: () => Promise.all(deferred) };
  }

  function receipt(clientId: string, body = '{"total":1}'): NewReceipt {
    return { chain_id: "chain-1", client_id: clientId, app_user_id: "app-user-1", body, user_key: "hmac-sha256:app-user-1" };
  }

  it("stores a receipt with its created event on the shard its ID names; a retry of the key gets the first answer", async () => {
    const clientId = uniqueId("pos-placement");
    const idempotencyKey = uniqueId("key");
    const { context, settled } = contextOf();
    const first = await placeAndStore(context, receipt(clientId), idempotencyKey, newCreationNotice);
    expect(first.kind).toBe("added");
    if (first.kind !== "added") return;
    expect(shardOfId(SHARDS, first.response.data.receipt_id)).toBe(first.shard);
    expect(shardOfId(SHARDS, first.event.event_id)).toBe(first.shard);

    expect(await placeAndStore(context, receipt(clientId), idempotencyKey, newCreationNotice)).toEqual({
      kind: "replayed",
      response: first.response,
    });
    expect(await placeAndStore(context, receipt(clientId, '{"total":2}'), idempotencyKey, newCreationNotice)).toEqual({
      kind: "conflict",
    });
    await settled();
    expect(await receiptsOf(clientId)).toBe(1);
  });

  it("a shard whose call failed gets no new receipt from this isolate for a while", async () => {
    const clientId = uniqueId("pos-placement");
    const idempotencyKey = uniqueId("key");
    const [down] = rankOf(idempotencyKey);
    const broken = {
      prepare: (sql: string) => down!.db.prepare(sql),
      batch: () => Promise.reject(new Error("shard unavailable")),
    };
    const { context, settled } = contextOf({ ...env, [down!.binding]: broken });
    await expect(placeAndStore(context, receipt(clientId), idempotencyKey, newCreationNotice)).rejects.toThrow("shard unavailable");
    expect([...context.memory.failingUntil.keys()]).toEqual([down!.name]);

    for (let i = 0; i < 10; i += 1) {
      const stored = await placeAndStore(context, receipt(clientId), undefined, newCreationNotice);
      expect(stored.kind).toBe("added");
      expect(stored.kind === "added" && stored.shard.name).not.toBe(down!.name);
    }
    await settled();
    expect(await receiptsOf(clientId)).toBe(10);
  });

  it.each([
    ["with a key", () => uniqueId("key")],
    ["without a key", () => undefined],
  ])("docs/api.md#event-feed an add whose event would commit too late for the feed is stored once more under fresh IDs (%s): one receipt, its event on time", async (_label, keyOf) => {
    const clientId = uniqueId("pos-placement");
    const { context, settled } = contextOf();
    const made: CreationNotice[] = [];
    // The first event_id as a D1 round trip of 6 s would leave it: older than the bound at its commit.
    const slowFirst = (data: AddResponse["data"], shard: Shard): CreationNotice => {
      const event = newCreationNotice(data, shard);
      made.push(made.length > 0 ? event : { ...event, event_id: idOnShard(uuidv7({ msecs: Date.now() - (EVENT_COMMIT_SECONDS + 1) * 1000 }), shard) });
      return made.at(-1)!;
    };
    const stored = await placeAndStore(context, receipt(clientId), keyOf(), slowFirst);
    expect(stored.kind).toBe("added");
    expect(made).toHaveLength(2);
    expect(stored.kind === "added" && stored.event).toEqual(made[1]);
    await settled();
    expect(await receiptsOf(clientId)).toBe(1);
  });

  it("20 calls racing with one key in 20 isolates store one receipt: the shard's transaction decides", async () => {
    const clientId = uniqueId("pos-placement");
    const idempotencyKey = uniqueId("key");
    const contexts = Array.from({ length: 20 }, () => contextOf());
    const outcomes = await Promise.all(
      contexts.map(({ context }) => placeAndStore(context, receipt(clientId), idempotencyKey, newCreationNotice)),
    );
    const added = outcomes.filter((outcome) => outcome.kind === "added");
    expect(added).toHaveLength(1);
    const response = added[0]!.kind === "added" ? added[0]!.response : undefined;
    expect(outcomes.filter((outcome) => outcome.kind === "replayed")).toEqual(Array(19).fill({ kind: "replayed", response }));
    await Promise.all(contexts.map(({ settled }) => settled()));
    expect(await receiptsOf(clientId)).toBe(1);
  });

  it("calls racing with one key while its shard closes store one receipt: an isolate runs them one after another", async () => {
    const clientId = uniqueId("pos-placement");
    const idempotencyKey = uniqueId("key");
    const [first] = rankOf(idempotencyKey);
    // The first call's write on the key's shard is slow to come back; the second call starts
    // meanwhile, after the shard closed, so it reads the states on the other side of the change.
    let writing!: () => void;
    const written = new Promise<void>((resolve) => (writing = resolve));
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const slow = {
      prepare: (sql: string) => first!.db.prepare(sql),
      batch: async (statements: D1PreparedStatement[]) => {
        writing();
        await gate;
        return first!.db.batch(statements);
      },
    };
    const { context, settled } = contextOf({ ...env, [first!.binding]: slow });
    try {
      const earlier = placeAndStore(context, receipt(clientId), idempotencyKey, newCreationNotice);
      await written;
      const closed: ShardState = { state: "closed", changed_at: new Date().toISOString(), by: "operator" };
      await env.SHARD_STATES.put(shardStateKey(first!.name), JSON.stringify(closed));
      const later = placeAndStore(context, receipt(clientId), idempotencyKey, newCreationNotice);
      await scheduler.wait(50);
      release();
      const [one, two] = await Promise.all([earlier, later]);
      expect(one.kind).toBe("added");
      expect(two).toEqual({ kind: "replayed", response: one.kind === "added" ? one.response : undefined });
      await settled();
      expect(await receiptsOf(clientId)).toBe(1);
      expect(context.memory.keysUnderWay.size).toBe(0);
    } finally {
      release();
      await env.SHARD_STATES.delete(shardStateKey(first!.name));
    }
  });

  it("two calls of one key that saw a reopened shard on either side each claim ahead on the other's target: one receipt, one answer", async () => {
    const clientId = uniqueId("pos-placement");
    const idempotencyKey = uniqueId("key");
    const [reopened, next] = rankOf(idempotencyKey);
    const aMinuteAgo = new Date(Date.now() - 60_000).toISOString();
    // One isolate sees the first shard of the key's order reopened (its target, the next shard
    // claimed ahead); the other still sees it closed (claimed ahead, the next shard its target).
    const viewOf = (state: ShardState["state"]) => {
      const memory = newPlacementMemory();
      memory.statesCopy = { states: new Map([[reopened!.name, { state, changed_at: aMinuteAgo, by: "operator" }]]), until: Number.POSITIVE_INFINITY };
      return memory;
    };
    // Each call's store on its target waits until both claims made ahead are in: the exact interleaving.
    let claimedOpen!: () => void;
    let claimedClosed!: () => void;
    const bothClaimed = Promise.all([new Promise<void>((resolve) => (claimedOpen = resolve)), new Promise<void>((resolve) => (claimedClosed = resolve))]);
    const after = (db: D1Database, before: () => Promise<unknown>, then: () => void) => ({
      prepare: (sql: string) => db.prepare(sql),
      batch: async (statements: D1PreparedStatement[]) => {
        await before();
        const results = await db.batch(statements);
        then();
        return results;
      },
    });
    const none = () => Promise.resolve();
    const sawOpen = contextOf(
      { ...env, [reopened!.binding]: after(reopened!.db, () => bothClaimed, none), [next!.binding]: after(next!.db, none, () => claimedOpen()) },
      viewOf("open"),
    );
    const sawClosed = contextOf(
      { ...env, [reopened!.binding]: after(reopened!.db, none, () => claimedClosed()), [next!.binding]: after(next!.db, () => bothClaimed, none) },
      viewOf("closed"),
    );
    const outcomes = await Promise.all([sawOpen, sawClosed].map(({ context }) => placeAndStore(context, receipt(clientId), idempotencyKey, newCreationNotice)));
    const answered = outcomes.map((outcome) => (outcome.kind === "added" || outcome.kind === "replayed" ? outcome.response.data.receipt_id : outcome.kind));
    expect(answered[0]).toBe(answered[1]);
    // The claim on the shard ranked first wins: its receipt is stored where the other call claimed ahead.
    expect(shardOfId(SHARDS, answered[0]!)).toBe(next);
    await Promise.all([sawOpen.settled(), sawClosed.settled()]);
    expect(await receiptsOf(clientId)).toBe(1);
    const events = await rowsOnEveryShard<{ receipt_id: string }>(
      "SELECT receipt_id FROM notice_outbox WHERE json_extract(payload, '$.type') = 'receipt.created' AND json_extract(payload, '$.client_id') = ?",
      clientId,
    );
    expect(events).toEqual([{ receipt_id: answered[0] }]);
  });

  it("docs/storage.md a claim too old to make good is not made good under an erasure's fence either: the call stores a receipt of its own, after the erasure", async () => {
    const clientId = uniqueId("pos-placement");
    const idempotencyKey = uniqueId("key");
    const [reopened, target] = rankOf(idempotencyKey);
    const memory = newPlacementMemory();
    const aMinuteAgo = new Date(Date.now() - 60_000).toISOString();
    memory.statesCopy = { states: new Map([[reopened!.name, { state: "closed", changed_at: aMinuteAgo, by: "operator" }]]), until: Number.POSITIVE_INFINITY };
    const { context, settled } = contextOf(env, memory);
    // A call that claimed the key ahead, then died before it stored its receipt, longer ago than an
    // event may take to commit; the app user was erased since, after that receipt's time.
    const sent = receipt(clientId);
    const createdAt = new Date(Date.now() - (EVENT_COMMIT_SECONDS + 5) * 1000).toISOString();
    const died = { ...sent, receipt_id: idOnShard(uuidv7({ msecs: Date.parse(createdAt) }), target!), created_at: createdAt };
    const data = { receipt_id: died.receipt_id, chain_id: sent.chain_id, client_id: clientId, app_user_id: sent.app_user_id, created_at: createdAt };
    const claim = { key: idempotencyKey, fingerprint: await requestFingerprint(sent), response: { data, status: "OK", status_code: 200 } as const };
    await runBatch(reopened!.db, [claimKey(died, claim, { keepUser: false })]);
    const erasedAt = new Date(Date.now() - 2000).toISOString();
    await runBatch(target!.db, [writeFence(sent.user_key, erasedAt)]);

    const stored = await placeAndStore(context, sent, idempotencyKey, newCreationNotice);
    // The dead call's receipt was never stored, so no export before the erasure could hold it: an
    // answer naming it, made before the erasure, would tell the app of a receipt those exports lack.
    expect(stored.kind === "added" || stored.kind === "replayed" ? stored.response.data.receipt_id : stored.kind).not.toBe(died.receipt_id);
    expect(stored.kind === "added" || stored.kind === "replayed" ? stored.response.data.created_at > erasedAt : stored.kind).toBe(true);
    await settled();
    expect(await receiptsOf(clientId)).toBe(1);
  });

  it("a call whose earlier call of the key never ends (its request canceled) waits KEY_WAIT_MS, then stores", async () => {
    const clientId = uniqueId("pos-placement");
    const idempotencyKey = uniqueId("key");
    const { context, settled } = contextOf();
    context.memory.keysUnderWay.set(`${clientId}\n${idempotencyKey}`, new Promise(() => undefined));
    const started = Date.now();
    const stored = await placeAndStore(context, receipt(clientId), idempotencyKey, newCreationNotice);
    expect(stored.kind).toBe("added");
    expect(Date.now() - started).toBeGreaterThanOrEqual(KEY_WAIT_MS);
    expect(context.memory.keysUnderWay.size).toBe(0);
    await settled();
    expect(await receiptsOf(clientId)).toBe(1);
  }, 3 * KEY_WAIT_MS);

  it("with every shard closed, throws NoOpenShardError and stores nothing", async () => {
    const clientId = uniqueId("pos-placement");
    const memory = newPlacementMemory();
    // The isolate's copy of the states, still fresh: no KV read decides here.
    memory.statesCopy = {
      states: new Map(SHARDS.map((shard) => [shard.name, changed("closed", HOUR_MS)])),
      until: Number.POSITIVE_INFINITY,
    };
    const { context } = contextOf(env, memory);
    await expect(placeAndStore(context, receipt(clientId), undefined, newCreationNotice)).rejects.toBeInstanceOf(NoOpenShardError);
    expect(await receiptsOf(clientId)).toBe(0);
  });
});
