/**
 * The soak's rules (soak/reconcile.ts, docs/reliability.md): what counts as lost, out of order,
 * a duplicate or an unexplained 5xx, on histories small enough to read. And the fault plan: the
 * same seed plans the same faults, every kind at least once.
 */
import { describe, expect, it } from "vitest";
import type { ErasureRecord, LoadRecord, RequestRecord } from "../../soak/load.ts";
import { planFaults } from "../../soak/plan.ts";
import { Prng } from "../../soak/prng.ts";
import { reconcile, type FaultWindow, type ReconcileInput, type StoreSnapshot } from "../../soak/reconcile.ts";
import type { Delivery } from "../../soak/receiver.ts";

const T = Date.parse("2026-11-23T10:00:00.000Z");
/** When the adds of these histories stored their receipt, as their answers say. */
const CREATED = new Date(T + 5).toISOString();
const BODY = (marker: string) => JSON.stringify({ total: 1, pos_receipt_number: marker });
/** A receipt added in DR Retail, as the reconciliation sees it: its original's text, with marker d1. */
const DR_BODY = JSON.stringify({ receipt_identifier: { sequence_number: 1, extended_number: { value: "d1", context: "chain" } } });
const DR_MODEL = { format: "dr-retail/v1.1", marker: "d1", total: 1290, linesTotal: 1290 };

/** A history in which receipt r1 (body m1) was added at T and, unless told, nothing else happened. */
function history(changes: {
  requests?: RequestRecord[];
  deliveries?: Delivery[];
  store?: Partial<StoreSnapshot>;
  faults?: FaultWindow[];
  erasures?: ErasureRecord[];
}): ReconcileInput {
  const load: LoadRecord = {
    requests: changes.requests ?? [added("r1", "m1")],
    bodies: new Map([["m1", BODY("m1")], ["m2", BODY("m2")], ["d1", DR_BODY]]),
    drReceipts: new Map([["d1", { format: "dr-retail/v1.1", total: 1290 }]]),
    erasures: changes.erasures ?? [],
    exports: [],
  };
  return {
    load,
    deliveries: changes.deliveries ?? [],
    faults: changes.faults ?? [],
    store: { receipts: [], outbox: [], failed: [], keys: [], archived: 0, ...changes.store },
    shardOf: (id) => (id.startsWith("s2-") ? "s2" : "s1"),
    now: T + 60_000,
  };
}

function added(receiptId: string, marker: string, extra: Partial<RequestRecord> = {}): RequestRecord {
  return { route: "add", action: "add", clientId: "c", start: T, end: T + 10, status: 200, expected: [200], receiptId, marker, appUserId: "u1", createdAt: CREATED, ...extra };
}

function created(receiptId: string, marker: string, at: number, eventId = `ce-${receiptId}`): Delivery {
  return {
    at,
    webhookId: eventId,
    outcome: "applied",
    event: { type: "receipt.created", receipt_id: receiptId, occurred_at: new Date(T).toISOString(), event_id: eventId, app_user_id: "u1" },
    receiptText: BODY(marker),
  };
}

function deleted(receiptId: string, at: number): Delivery {
  const eventId = `de-${receiptId}`;
  return { at, webhookId: eventId, outcome: "applied", event: { type: "receipt.deleted", receipt_id: receiptId, occurred_at: new Date(T).toISOString(), event_id: eventId, app_user_id: "u1" } };
}

const outboxRow = (receiptId: string, type: "created" | "deleted", delivered = true) => ({
  event_id: `${type === "created" ? "ce" : "de"}-${receiptId}`,
  receipt_id: receiptId,
  type: `receipt.${type}`,
  delivered_at: delivered ? new Date(T + 1000).toISOString() : null,
  app_user_id: "u1",
});

const storedR1 = { receipts: [{ receipt_id: "r1", marker: "m1", app_user_id: "u1", created_at: CREATED }], outbox: [outboxRow("r1", "created")] };

function found(input: ReconcileInput) {
  const { problems } = reconcile(input);
  return Object.fromEntries(Object.entries(problems).filter(([, list]) => list.length > 0).map(([problem, list]) => [problem, list.length]));
}

/** An erasure of u1 that began after r1's add and whose event `E-u1` arrived at `heardAt`. */
const erasureOfU1 = (): ErasureRecord => ({
  appUserId: "u1", start: T + 1000, end: T + 2000, eventId: "E-u1", occurredAt: new Date(T + 1500).toISOString(), receiptsErased: 1, attempts: 1, via: "operator",
});
function erasedEvent(at: number): Delivery {
  return { at, webhookId: "E-u1", outcome: "applied", event: { type: "app_user.erased", receipt_id: undefined!, occurred_at: new Date(T + 2000).toISOString(), event_id: "E-u1", app_user_id: "u1" } };
}

describe("docs/reliability.md the soak's reconciliation of erasures (docs/api.md#erasure)", () => {
  const erasedOutbox = { outbox: [{ event_id: "E-u1", receipt_id: "E-u1", type: "app_user.erased", delivered_at: new Date(T + 5000).toISOString(), app_user_id: "u1" }] };

  it("an erased receipt may lack its rows and its deleted event; the erasure's event is what the app hears", () => {
    const input = history({ erasures: [erasureOfU1()], store: erasedOutbox, deliveries: [created("r1", "m1", T + 100), erasedEvent(T + 5000)] });
    expect(found(input)).toEqual({});
    expect(reconcile(input).events).toMatchObject({ erased: 1, receiptsErased: 1 });
  });

  it("an erasure whose event never arrived is lost; one that never finished needs an operator", () => {
    expect(found(history({ erasures: [erasureOfU1()], store: erasedOutbox }))).toEqual({ lost: 1 });
    const failed = { ...erasureOfU1(), eventId: undefined, attempts: 10 };
    expect(found(history({ erasures: [failed], store: erasedOutbox }))).toEqual({ "needs operator": 1 });
  });

  it("an earlier erasure's event refused for good, which a later erasure of the same user removed, is covered by the later one's", () => {
    const earlier = { ...erasureOfU1(), eventId: "E-early", occurredAt: new Date(T + 1500).toISOString() };
    const later = { ...erasureOfU1(), occurredAt: new Date(T + 2000).toISOString() };
    const refusedEarly: Delivery = { at: T + 1600, webhookId: "E-early", outcome: "push refused" };
    expect(found(history({ erasures: [earlier, later], store: erasedOutbox, deliveries: [refusedEarly, erasedEvent(T + 5000)] }))).toEqual({});
    // Not by one of an instant before it.
    const earlierStill = { ...later, occurredAt: new Date(T + 1000).toISOString() };
    expect(found(history({ erasures: [earlier, earlierStill], store: erasedOutbox, deliveries: [refusedEarly, erasedEvent(T + 5000)] }))).toEqual({ lost: 1 });
    // Nor one still to deliver: a later erasure leaves it, and it must arrive.
    expect(found(history({ erasures: [earlier, later], store: erasedOutbox, deliveries: [erasedEvent(T + 5000)] }))).toEqual({ lost: 1 });
  });

  it("an event of an erased receipt that arrives after the erasure's is out of order; an erased receipt still stored survived it", () => {
    const late = history({ erasures: [erasureOfU1()], store: erasedOutbox, deliveries: [erasedEvent(T + 5000), created("r1", "m1", T + 6000)] });
    expect(found(late)).toEqual({ "out of order": 1 });
    const survived = history({ erasures: [erasureOfU1()], store: { ...storedR1, outbox: [...storedR1.outbox, ...erasedOutbox.outbox] }, deliveries: [created("r1", "m1", T + 100), erasedEvent(T + 5000)] });
    expect(found(survived)).toEqual({ "survived erasure": 1 });
  });
});

describe("docs/reliability.md the soak's reconciliation of adds racing an erasure: its instant decides", () => {
  const erasedOutbox = { outbox: [{ event_id: "E-u1", receipt_id: "E-u1", type: "app_user.erased", delivered_at: new Date(T + 5000).toISOString(), app_user_id: "u1" }] };
  const at = (ms: number) => new Date(T + ms).toISOString();
  /** An add of r2 (body m2) sent while the erasure of u1 ran, its receipt created at T + `createdMs`. */
  const racing = (createdMs: number, extra: Partial<RequestRecord> = {}) =>
    added("r2", "m2", { start: T + 1200, end: T + 1800, createdAt: at(createdMs), ...extra });
  const r2Row = (createdMs: number) => ({ receipt_id: "r2", marker: "m2", app_user_id: "u1", created_at: at(createdMs) });
  const base = (requests: RequestRecord[], store: Partial<StoreSnapshot> = erasedOutbox, deliveries: Delivery[] = []) =>
    history({ requests: [added("r1", "m1"), ...requests], erasures: [erasureOfU1()], store, deliveries: [erasedEvent(T + 5000), ...deliveries] });

  it("an add answered 200 whose receipt was created at or before the instant and is gone counts as erased (fenced or swept)", () => {
    expect(found(base([racing(1400)]))).toEqual({});
    expect(found(base([racing(1500)]))).toEqual({});
    expect(reconcile(base([racing(1400)])).events.racing).toEqual({ erased: 1, kept: 0 });
  });

  it("its created event may even arrive after the erasure's: the app drops it, being of before the instant", () => {
    expect(found(base([racing(1400)], erasedOutbox, [created("r2", "m2", T + 6000)]))).toEqual({});
  });

  it("a receipt created at or before the instant that is still stored survived the erasure, whenever its add ran", () => {
    const store = { ...erasedOutbox, receipts: [r2Row(1400)], outbox: [...erasedOutbox.outbox, outboxRow("r2", "created")] };
    expect(found(base([racing(1400)], store, [created("r2", "m2", T + 1900)]))).toEqual({ "survived erasure": 1 });
  });

  it("a receipt created after the instant is the user's anew: it must be stored and heard of, else it is lost", () => {
    const store = { ...erasedOutbox, receipts: [r2Row(1600)], outbox: [...erasedOutbox.outbox, outboxRow("r2", "created")] };
    const kept = base([racing(1600)], store, [created("r2", "m2", T + 1900)]);
    expect(found(kept)).toEqual({});
    expect(reconcile(kept).events.racing).toEqual({ erased: 0, kept: 1 });
    expect(found(base([racing(1600)]))).toEqual({ lost: 1 });
    expect(found(base([racing(1600)], store))).toEqual({ lost: 1 });
  });

  it("without an answer's created_at, a UUIDv7 receipt_id's own timestamp places it against the instant", () => {
    const id = (ms: number) => `${(T + ms).toString(16).padStart(12, "0")}7000-8000-000000000000`.replace(/^(.{8})(.{4})/, "$1-$2-");
    const before = added(id(1400), "m2", { start: T + 1200, end: T + 1800, createdAt: undefined });
    expect(found(base([before]))).toEqual({});
    const after = added(id(1600), "m2", { start: T + 1200, end: T + 1800, createdAt: undefined });
    expect(found(base([after]))).toEqual({ lost: 1 });
  });

  it("a delete refused as not found is expected of a receipt the erasure took, not of one created after its instant", () => {
    const deleteR2 = (): RequestRecord => ({ route: "delete", action: "delete", clientId: "c", start: T + 3000, end: T + 3010, status: 406, expected: [200], receiptId: "r2", appUserId: "u1" });
    expect(found(base([racing(1400), deleteR2()]))).toEqual({});
    const store = { ...erasedOutbox, receipts: [r2Row(1600)], outbox: [...erasedOutbox.outbox, outboxRow("r2", "created")] };
    expect(found(base([racing(1600), deleteR2()], store, [created("r2", "m2", T + 1900)]))).toEqual({ "unexpected answer": 1 });
  });
});

describe("docs/reliability.md the soak's reconciliation", () => {
  it("a stored receipt whose created event arrived, twice: no problem, one duplicate", () => {
    const input = history({ store: storedR1, deliveries: [created("r1", "m1", T + 100), created("r1", "m1", T + 900)] });
    expect(found(input)).toEqual({});
    expect(reconcile(input).events).toMatchObject({ created: 1, duplicates: 1, delayMs: { p50: 100, max: 100 } });
  });

  it("a stored receipt whose created event never arrived is lost", () => {
    expect(found(history({ store: storedR1 }))).toEqual({ lost: 1 });
  });

  it("an add answered 200 whose receipt is neither stored nor deleted is lost", () => {
    expect(found(history({}))).toMatchObject({ lost: 1 });
  });

  it("a deleted receipt: its deleted event is required, its created event optional but never after", () => {
    const requests = [added("r1", "m1"), { ...added("r1", "m1"), route: "delete" as const, action: "delete", marker: undefined }];
    const store = { outbox: [outboxRow("r1", "created"), outboxRow("r1", "deleted")] };
    expect(found(history({ requests, store, deliveries: [created("r1", "m1", T + 100), deleted("r1", T + 200)] }))).toEqual({});
    const alone = history({ requests, store, deliveries: [deleted("r1", T + 200)] });
    expect(found(alone)).toEqual({});
    expect(reconcile(alone).events.createdSkipped).toBe(1);
    expect(found(history({ requests, store, deliveries: [deleted("r1", T + 200), created("r1", "m1", T + 300)] }))).toEqual({ "out of order": 1 });
    expect(found(history({ requests, store, deliveries: [created("r1", "m1", T + 100)] }))).toEqual({ lost: 1 });
  });

  it("a receipt pushed with a body other than the one added is altered", () => {
    const input = history({ store: storedR1, deliveries: [{ ...created("r1", "m1", T + 100), receiptText: BODY("m2") }] });
    expect(found(input)).toEqual({ "altered body": 1 });
  });

  it("docs/api.md#dr-retail a receipt added in DR Retail: pushed with its original and the model its body maps to, or altered", () => {
    const requests = [added("d-r1", "d1")];
    const store = { receipts: [{ receipt_id: "d-r1", marker: "d1", app_user_id: "u1", created_at: CREATED }], outbox: [outboxRow("d-r1", "created")] };
    const push = (drModel: Delivery["drModel"], receiptText = DR_BODY): Delivery => ({ ...created("d-r1", "d1", T + 100), receiptText, ...(drModel && { drModel }) });
    const good = history({ requests, store, deliveries: [push(DR_MODEL)] });
    expect(found(good)).toEqual({});
    expect(reconcile(good).events.drCreated).toBe(1);
    for (const drModel of [{ ...DR_MODEL, total: 1291 }, { ...DR_MODEL, linesTotal: 1 }, { ...DR_MODEL, format: "dr-retail/v1.0" }, undefined]) {
      expect(found(history({ requests, store, deliveries: [push(drModel)] })), JSON.stringify(drModel)).toEqual({ "altered body": 1 });
    }
    expect(found(history({ requests, store, deliveries: [push(DR_MODEL, BODY("d1"))] }))).toEqual({ "altered body": 1 });
  });

  it("one body stored as two receipts is stored twice; one key answered with two receipts too", () => {
    const requests = [added("r1", "m1", { key: "k" }), added("r2", "m1", { key: "k" })];
    const store = {
      receipts: [{ receipt_id: "r1", marker: "m1", app_user_id: "u1", created_at: CREATED }, { receipt_id: "r2", marker: "m1", app_user_id: "u1", created_at: CREATED }],
      outbox: [outboxRow("r1", "created"), outboxRow("r2", "created")],
    };
    const deliveries = [created("r1", "m1", T + 100), created("r2", "m1", T + 100)];
    expect(found(history({ requests, store, deliveries }))).toEqual({ "stored twice": 1, "key answered with two receipts": 1 });
  });

  it("a receipt both in its shard and in the archive (a move that removed no row) is stored twice; archived alone it is stored", () => {
    const row = { receipt_id: "r1", marker: "m1", app_user_id: "u1", created_at: CREATED };
    const deliveries = [created("r1", "m1", T + 100)];
    const outbox = [outboxRow("r1", "created")];
    expect(found(history({ store: { receipts: [row, row], archived: 1, outbox }, deliveries }))).toEqual({ "stored twice": 1 });
    expect(found(history({ store: { receipts: [row], archived: 1, outbox }, deliveries }))).toEqual({});
  });

  it("a 5xx is explained by a D1 fault in the API on the receipt's shard, or a restart; nothing else", () => {
    const failedDelete = (receiptId: string): RequestRecord => ({
      route: "delete", action: "delete", clientId: "c", start: T, end: T + 50, status: 500, expected: [200], receiptId,
    });
    const d1OnS1: FaultWindow = { kind: "d1", worker: "api", shard: "s1", start: T - 100, end: T + 20 };
    const store = storedR1;
    const deliveries = [created("r1", "m1", T + 100)];
    const base = { store, deliveries };
    expect(found(history({ ...base, requests: [added("r1", "m1"), failedDelete("r1")], faults: [d1OnS1] }))).toEqual({});
    expect(found(history({ ...base, requests: [added("r1", "m1"), failedDelete("s2-x")], faults: [d1OnS1] }))).toEqual({ "unexplained 5xx": 1 });
    const notifierOnly: FaultWindow = { ...d1OnS1, worker: "notifier" };
    expect(found(history({ ...base, requests: [added("r1", "m1"), failedDelete("r1")], faults: [notifierOnly] }))).toEqual({ "unexplained 5xx": 1 });
    const restart: FaultWindow = { kind: "restart", start: T + 40, end: T + 400 };
    const noAnswer = { ...failedDelete("s2-x"), status: null };
    expect(found(history({ ...base, requests: [added("r1", "m1"), noAnswer], faults: [restart] }))).toEqual({});
    expect(found(history({ ...base, requests: [added("r1", "m1"), noAnswer] }))).toEqual({ "unexplained 5xx": 1 });
  });

  it("an answer outside what the request may get is unexpected; two racing deletes both answered 200 deleted twice", () => {
    const refused: RequestRecord = { ...added("r1", "m1"), status: 406 };
    expect(found(history({ requests: [refused] }))).toEqual({ "unexpected answer": 1 });
    const racer = (): RequestRecord => ({ route: "delete", action: "delete racing", clientId: "c", start: T, end: T, status: 200, expected: [200, 406], receiptId: "r1", race: 7 });
    const store = { outbox: [outboxRow("r1", "created"), outboxRow("r1", "deleted")] };
    expect(found(history({ requests: [added("r1", "m1"), racer(), racer()], store, deliveries: [deleted("r1", T + 5)] }))).toEqual({ "deleted twice": 1 });
  });

  it("the drain's leftovers: undelivered events, dead letters (needs operator), keys of no receipt", () => {
    const store = {
      receipts: storedR1.receipts,
      outbox: [outboxRow("r1", "created", false)],
      failed: [{ event_id: "x", receipt_id: "r9" }],
      keys: [
        { client_id: "c", idempotency_key: "k", receipt_id: "r8", created_at: new Date(T).toISOString(), erased_at: null, shard: "s1" },
        // Kept in erased form: an erasure took its receipt, and a retry replays the first answer.
        { client_id: "c", idempotency_key: "k2", receipt_id: "r7", created_at: new Date(T).toISOString(), erased_at: new Date(T + 10).toISOString(), shard: "s1" },
      ],
    };
    expect(found(history({ store, deliveries: [created("r1", "m1", T + 100)] }))).toEqual({ undelivered: 1, "needs operator": 1, "orphan row": 1 });
  });

  it("docs/api.md#limits a key claimed ahead on another shard than its receipt's: never stored is right unless an answer named it", () => {
    const claimedAhead = { client_id: "c", idempotency_key: "k", receipt_id: "s2-r8", created_at: new Date(T).toISOString(), erased_at: null, shard: "s1" };
    const store = { ...storedR1, keys: [claimedAhead] };
    expect(found(history({ store, deliveries: [created("r1", "m1", T + 100)] }))).toEqual({});
    const answeredWithIt: RequestRecord = { ...added("s2-r8", "m8"), status: 200 };
    expect(found(history({ requests: [added("r1", "m1"), answeredWithIt], store, deliveries: [created("r1", "m1", T + 100)] }))).toMatchObject({ "orphan row": 1 });
  });

  it("a push refused for a bad signature is counted", () => {
    const input = history({ store: storedR1, deliveries: [created("r1", "m1", T + 100), { at: T, webhookId: "w", outcome: "bad signature" }] });
    expect(found(input)).toEqual({ "bad signature": 1 });
  });
});

describe("docs/reliability.md the fault plan", () => {
  it("one seed, one plan; another seed, another", () => {
    const plan = (seed: number) => planFaults(new Prng(seed).fork("plan"), 150, ["s1", "s2"]);
    expect(plan(7)).toEqual(plan(7));
    expect(plan(7)).not.toEqual(plan(8));
  });

  it("every kind at least once, even in a short run; never two shards closed at once", () => {
    for (let seed = 1; seed <= 50; seed += 1) {
      const plan = planFaults(new Prng(seed), 30, ["s1", "s2"]);
      const kinds = new Set(plan.map((fault) => (fault.kind === "d1" ? `d1 ${fault.worker}` : fault.kind)));
      expect([...kinds].sort()).toEqual(["d1 api", "d1 notifier", "push outage", "push refused", "queue", "restart", "shard closed"]);
      const closed = plan.flatMap((fault) => (fault.kind === "shard closed" ? [fault] : []));
      for (const [i, fault] of closed.entries()) {
        for (const other of closed.slice(i + 1)) expect(other.at >= fault.at + fault.seconds || fault.at >= other.at + other.seconds).toBe(true);
      }
    }
  });

  it("forks draw apart: one concern's draws never shift another's", () => {
    const root = new Prng(42);
    const a = root.fork("a");
    const first = [a.next(), a.next()];
    const again = new Prng(42).fork("a");
    new Prng(42).fork("b").next();
    expect([again.next(), again.next()]).toEqual(first);
  });
});
