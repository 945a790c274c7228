/**
 * The soak's reconciliation: after the load and the drain, every answer, every delivery the push
 * receiver saw and every row the shards hold are checked against each other. Pure, so that its
 * rules are tested on their own (test/soak/reconcile.test.ts).
 *
 * What the service promises (docs/api.md#receipt-events, docs/reliability.md): every stored
 * receipt's receipt.created event and every deletion's receipt.deleted event reach the app, once
 * as the app sees it (by webhook-id), never a receipt's created event after its deleted event; a
 * receipt deleted before its created event went out may have the deleted event alone. An
 * erasure (docs/api.md#erasure) is an instant, its event's occurred_at: every receipt of the app
 * user created at or before it goes, with every event not yet sent, also one whose add raced the
 * erasure; every receipt created after it stays. The app hears of the erasure instead.
 */
import { percentile } from "../harness/percentile.ts";
import type { ErasureRecord, LoadRecord, RequestRecord, Route } from "./load.ts";
import type { Delivery } from "./receiver.ts";

/** What the shards and the archive hold after the drain, all shards together. */
export interface StoreSnapshot {
  /** The receipts in the shards and in the archive: a receipt_id twice is one stored twice. */
  receipts: { receipt_id: string; marker: string | null; app_user_id: string; created_at: string }[];
  /** How many of `receipts` are lines of the archive. */
  archived: number;
  outbox: { event_id: string; receipt_id: string; type: string; delivered_at: string | null; app_user_id: string }[];
  failed: { event_id: string; receipt_id: string }[];
  /** `erased_at`: set once an erasure took the key's receipt (or fenced it out). */
  /**
   * `shard`: the shard holding the record; one whose receipt_id names another shard was claimed
   * ahead there (docs/storage.md "One key, one receipt").
   */
  keys: { client_id: string; idempotency_key: string; receipt_id: string; created_at: string; erased_at: string | null; shard: string }[];
}

/** A fault as it happened, in ms since the epoch; a restart's window runs until the runtime was back. */
export interface FaultWindow {
  kind: "d1" | "queue" | "push outage" | "push refused" | "shard closed" | "restart";
  start: number;
  end: number;
  worker?: "api" | "notifier";
  shard?: string;
}

export interface ReconcileInput {
  load: LoadRecord;
  deliveries: readonly Delivery[];
  faults: readonly FaultWindow[];
  store: StoreSnapshot;
  /** The name of the shard an ID names. */
  shardOf(id: string): string | undefined;
  now: number;
}

/** Everything that must not happen; each lists what it found, as a person would want to look it up. */
export const PROBLEMS = [
  "lost",
  "out of order",
  "unexplained 5xx",
  "unexpected answer",
  "stored twice",
  "key answered with two receipts",
  "deleted twice",
  "altered body",
  "bad signature",
  "event of no receipt",
  "undelivered",
  "needs operator",
  "orphan row",
  "survived erasure",
] as const;

export type Problem = (typeof PROBLEMS)[number];

export type AnswerClass = "2xx" | "4xx expected" | "4xx unexpected" | "5xx" | "no answer";

export interface Reconciliation {
  answers: Record<Route, Record<AnswerClass, number>>;
  events: {
    created: number;
    deleted: number;
    /** Receipts deleted before their created event went out: the app saw the deletion alone. */
    createdSkipped: number;
    /** Created events of receipts added in DR Retail, each checked against the body's model. */
    drCreated: number;
    /** Deliveries of a webhook-id the app had applied already. */
    duplicates: number;
    /** app_user.erased events delivered, and the receipts their erasures took. */
    erased: number;
    receiptsErased: number;
    /**
     * Adds answered 200 while an erasure of their app user ran, by which side of its instant
     * their receipt was created: erased with the user, or the user's anew.
     */
    racing: { erased: number; kept: number };
    delayMs: { p50: number; p99: number; max: number };
  };
  /** 5xx answers and requests with no answer, and how many of them a fault explains. */
  failedRequests: { total: number; explained: number };
  problems: Record<Problem, string[]>;
}

/** How far around a fault window a failed request still counts as its doing: clocks and queues. */
const MARGIN_MS = 1000;
const IDEMPOTENCY_RETENTION_MS = 24 * 60 * 60 * 1000;
const OUTBOX_RETENTION_MS = 14 * 24 * 60 * 60 * 1000;

export function reconcile(input: ReconcileInput): Reconciliation {
  const problems = Object.fromEntries(PROBLEMS.map((problem) => [problem, [] as string[]])) as Record<Problem, string[]>;
  const erasures = new Erasures(input);
  const answers = countAnswers(input.load.requests, erasures, problems);
  const failedRequests = explainFailures(input, problems);
  checkAnswers(input, erasures, problems);
  const events = checkEvents(input, erasures, problems);
  checkStore(input, erasures, problems);
  return { answers, events, failedRequests, problems };
}

function countAnswers(requests: readonly RequestRecord[], erasures: Erasures, problems: Record<Problem, string[]>): Reconciliation["answers"] {
  const empty = (): Record<AnswerClass, number> => ({ "2xx": 0, "4xx expected": 0, "4xx unexpected": 0, "5xx": 0, "no answer": 0 });
  const answers: Reconciliation["answers"] = { login: empty(), add: empty(), delete: empty() };
  for (const request of requests) {
    const { status } = request;
    // A till deletes what it holds, not knowing that an erasure took it meanwhile: not found.
    const expected = request.route === "delete" && erasures.mayHaveTaken(request.receiptId ?? "") ? [...request.expected, 406] : request.expected;
    const kind: AnswerClass =
      status === null ? "no answer"
      : status >= 500 ? "5xx"
      : status < 300 ? "2xx"
      : expected.includes(status) ? "4xx expected"
      : "4xx unexpected";
    answers[request.route][kind] += 1;
    if (status !== null && status < 500 && !expected.includes(status)) {
      problems["unexpected answer"].push(`${request.action} ${request.receiptId ?? request.marker ?? ""}: ${status}, expected ${request.expected.join(" or ")}`);
    }
  }
  return answers;
}

// A 5xx, or no answer at all, is the doing of a fault that was on while the request ran: a
// restart for any request, a failing D1 shard in the API Worker for add (on any shard: the key's
// or a random one) and for delete (on the receipt's shard).
function explainFailures(input: ReconcileInput, problems: Record<Problem, string[]>): Reconciliation["failedRequests"] {
  const failed = input.load.requests.filter((request) => request.status === null || request.status >= 500);
  let explained = 0;
  for (const request of failed) {
    const during = (fault: FaultWindow) => fault.start - MARGIN_MS <= request.end && request.start <= fault.end + MARGIN_MS;
    const cause = input.faults.find(
      (fault) =>
        during(fault) &&
        (fault.kind === "restart" ||
          (request.status !== null &&
            fault.kind === "d1" &&
            fault.worker === "api" &&
            (request.route === "add" || (request.route === "delete" && input.shardOf(request.receiptId ?? "") === fault.shard)))),
    );
    if (cause) explained += 1;
    else problems["unexplained 5xx"].push(`${request.action} at ${new Date(request.start).toISOString()}: ${request.status ?? "no answer"}`);
  }
  return { total: failed.length, explained };
}

/**
 * Which receipts the erasures took, by their instant: an erasure takes every receipt of its app
 * user created at or before its event's occurred_at, also one whose add raced it (fenced out, or
 * swept), and none created after it. A receipt's created_at is the one its add was answered with,
 * else its row's, else its UUIDv7 prefix's (docs/api.md: the ID's first 48 bits are created_at).
 */
class Erasures {
  readonly #byUser = new Map<string, ErasureRecord[]>();
  readonly #appUserOf = new Map<string, string>();
  readonly #addOf = new Map<string, RequestRecord>();
  readonly #createdAt = new Map<string, string>();

  constructor(input: ReconcileInput) {
    for (const erasure of input.load.erasures) this.#byUser.set(erasure.appUserId, [...(this.#byUser.get(erasure.appUserId) ?? []), erasure]);
    for (const row of input.store.receipts) this.#createdAt.set(row.receipt_id, row.created_at);
    for (const request of input.load.requests) {
      if (request.route === "add" && request.status === 200 && request.receiptId && request.appUserId) {
        this.#appUserOf.set(request.receiptId, request.appUserId);
        if (request.createdAt) this.#createdAt.set(request.receiptId, request.createdAt);
        if (!this.#addOf.has(request.receiptId)) this.#addOf.set(request.receiptId, request);
      }
    }
    for (const row of [...input.store.receipts, ...input.store.outbox]) this.#appUserOf.set(row.receipt_id, row.app_user_id);
    for (const delivery of input.deliveries) {
      if (delivery.event?.receipt_id) this.#appUserOf.set(delivery.event.receipt_id, delivery.event.app_user_id);
    }
  }

  get records(): readonly ErasureRecord[] {
    return [...this.#byUser.values()].flat();
  }

  /** The first finished erasure of the receipt's app user whose instant is at or after its created_at. */
  took(receiptId: string): ErasureRecord | undefined {
    const createdAt = this.#createdAtOf(receiptId);
    if (createdAt === undefined) return undefined;
    return this.#erasuresOf(receiptId).find((erasure) => erasure.occurredAt !== undefined && createdAt <= erasure.occurredAt);
  }

  /**
   * Whether an erasure took the receipt or may have: one whose instant is unknown (it never
   * finished) counts when it ended after the add began, and any counts for a receipt whose
   * created_at is unknown.
   */
  mayHaveTaken(receiptId: string): boolean {
    if (this.took(receiptId)) return true;
    const add = this.#addOf.get(receiptId);
    const known = this.#createdAtOf(receiptId) !== undefined;
    return this.#erasuresOf(receiptId).some((erasure) => !known || (erasure.occurredAt === undefined && (add === undefined || erasure.end >= add.start)));
  }

  /**
   * The erasure that took the receipt, when it began after the receipt's add had its answer: the
   * app then heard of the receipt, if at all, before it heard of the erasure.
   */
  surelyTook(receiptId: string): ErasureRecord | undefined {
    const add = this.#addOf.get(receiptId);
    const erasure = this.took(receiptId);
    return add && erasure && erasure.start > add.end ? erasure : undefined;
  }

  /** Adds answered 200 while an erasure of their app user ran, by whether it took their receipt. */
  racing(): Reconciliation["events"]["racing"] {
    const racing = { erased: 0, kept: 0 };
    for (const [receiptId, add] of this.#addOf) {
      const raced = this.#erasuresOf(receiptId).some((erasure) => add.start <= erasure.end && erasure.start <= add.end);
      if (raced) racing[this.took(receiptId) ? "erased" : "kept"] += 1;
    }
    return racing;
  }

  #erasuresOf(receiptId: string): ErasureRecord[] {
    return this.#byUser.get(this.#appUserOf.get(receiptId) ?? "") ?? [];
  }

  #createdAtOf(receiptId: string): string | undefined {
    return this.#createdAt.get(receiptId) ?? createdAtOfId(receiptId);
  }
}

function checkAnswers(input: ReconcileInput, erasures: Erasures, problems: Record<Problem, string[]>): void {
  const stored = new Set(input.store.receipts.map((receipt) => receipt.receipt_id));
  const deletedEvents = new Set(input.store.outbox.filter((row) => row.type === "receipt.deleted").map((row) => row.receipt_id));
  const answeredByKey = new Map<string, Set<string>>();
  const deletesByRace = new Map<number, number>();
  for (const request of input.load.requests) {
    if (request.status !== 200 || !request.receiptId) continue;
    if (request.route === "add") {
      if (!stored.has(request.receiptId) && !deletedEvents.has(request.receiptId) && !erasures.mayHaveTaken(request.receiptId)) {
        problems.lost.push(`receipt ${request.receiptId}: add answered 200, neither stored nor deleted`);
      }
      if (request.key) {
        const id = `${request.clientId} ${request.key}`;
        answeredByKey.set(id, (answeredByKey.get(id) ?? new Set()).add(request.receiptId));
      }
    } else if (request.route === "delete") {
      if (stored.has(request.receiptId)) problems.lost.push(`receipt ${request.receiptId}: delete answered 200, still stored`);
      else if (!deletedEvents.has(request.receiptId) && !erasures.mayHaveTaken(request.receiptId)) {
        problems.lost.push(`receipt ${request.receiptId}: delete answered 200, no deleted event recorded`);
      }
      if (request.race !== undefined) deletesByRace.set(request.race, (deletesByRace.get(request.race) ?? 0) + 1);
    }
  }
  for (const [key, receipts] of answeredByKey) {
    if (receipts.size > 1) problems["key answered with two receipts"].push(`${key}: ${[...receipts].join(", ")}`);
  }
  for (const [race, count] of deletesByRace) {
    if (count > 1) problems["deleted twice"].push(`race ${race}: ${count} deletes of one receipt answered 200`);
  }
}

function checkEvents(input: ReconcileInput, erasures: Erasures, problems: Record<Problem, string[]>): Reconciliation["events"] {
  for (const delivery of input.deliveries) {
    if (delivery.outcome === "bad signature") problems["bad signature"].push(delivery.webhookId);
  }
  // The app's view: each webhook-id applied once, at its first arrival.
  const applied = new Map<string, AppliedDelivery>();
  let duplicates = 0;
  for (const delivery of input.deliveries) {
    if (delivery.outcome !== "applied" || !delivery.event) continue;
    if (applied.has(delivery.webhookId)) duplicates += 1;
    else applied.set(delivery.webhookId, { ...delivery, event: delivery.event });
  }
  const byReceipt = new Map<string, { created: AppliedDelivery[]; deleted: number[] }>();
  const delays: number[] = [];
  let drCreated = 0;
  // Each receipt's body, as the add that stored it sent it: by the add's answer or by the row.
  const markerOfReceipt = new Map<string, string>();
  for (const request of input.load.requests) {
    if (request.route === "add" && request.receiptId && request.marker) markerOfReceipt.set(request.receiptId, request.marker);
  }
  const markers = new Map<string, Set<string>>();
  const seen = new Set<string>();
  for (const { receipt_id: id } of input.store.receipts) {
    if (seen.has(id)) problems["stored twice"].push(`receipt ${id}: twice in the shards and the archive`);
    seen.add(id);
  }
  for (const { receipt_id: id, marker } of input.store.receipts) {
    if (!marker) continue;
    markerOfReceipt.set(id, marker);
    markers.set(marker, new Set([id]));
  }
  // When the app heard of each erasure: every event of the receipts it took must come before.
  const erasedAt = new Map<string, number>();
  for (const delivery of applied.values()) {
    const { event } = delivery;
    delays.push(delivery.at - Date.parse(event.occurred_at));
    if (event.type === "app_user.erased") {
      erasedAt.set(event.event_id, delivery.at);
      continue;
    }
    const entry = byReceipt.get(event.receipt_id) ?? { created: [], deleted: [] };
    byReceipt.set(event.receipt_id, entry);
    if (event.type === "receipt.created") {
      entry.created.push(delivery);
      // A receipt whose add got no answer and which is gone since is known by its body alone.
      const marker = markerOfReceipt.get(event.receipt_id) ?? delivery.drModel?.marker ?? markerOf(delivery.receiptText);
      if (marker === undefined || input.load.bodies.get(marker) !== delivery.receiptText) {
        problems["altered body"].push(`${event.event_id}: the receipt pushed is not the body added`);
      } else markers.set(marker, (markers.get(marker) ?? new Set()).add(event.receipt_id));
      const dr = marker === undefined ? undefined : input.load.drReceipts.get(marker);
      if (dr || delivery.drModel) {
        drCreated += 1;
        if (!sameDrModel(dr, delivery.drModel, marker)) problems["altered body"].push(`${event.event_id}: the DR Retail receipt's model or format pushed is not the one its body maps to`);
      }
    } else if (event.type === "receipt.deleted") entry.deleted.push(delivery.at);
  }
  for (const [marker, receipts] of markers) {
    if (receipts.size > 1) problems["stored twice"].push(`body ${marker}: receipts ${[...receipts].join(", ")}`);
  }

  // A later erasure of the same app user removes an earlier one's event once it was dead-lettered
  // (it names the user): refused for good, the only dead letter a soak leaves; the app then hears
  // of the later one, whose instant covers the earlier's. One still to deliver stays and goes out.
  const refused = new Set(input.deliveries.filter(({ outcome }) => outcome === "push refused").map(({ webhookId }) => webhookId));
  const coveredLater = (erasure: ErasureRecord) =>
    erasure.eventId !== undefined && refused.has(erasure.eventId) &&
    erasures.records.some(
      (later) => later !== erasure && later.appUserId === erasure.appUserId && later.eventId !== undefined &&
        erasedAt.has(later.eventId) && (later.occurredAt ?? "") >= (erasure.occurredAt ?? ""),
    );
  for (const erasure of erasures.records) {
    if (!erasure.eventId) problems["needs operator"].push(`erasure of ${erasure.appUserId}: failed ${erasure.attempts} times`);
    else if (!erasedAt.has(erasure.eventId) && !coveredLater(erasure)) {
      problems.lost.push(`erasure of ${erasure.appUserId}: its app_user.erased event ${erasure.eventId} never arrived`);
    }
  }

  const stored = new Set(input.store.receipts.map((receipt) => receipt.receipt_id));
  const recorded = new Set(input.store.outbox.filter((row) => row.type !== "app_user.erased").map((row) => row.receipt_id));
  const known = new Set([...stored, ...recorded, ...byReceipt.keys()]);
  let createdSkipped = 0;
  for (const receiptId of known) {
    const { created, deleted } = byReceipt.get(receiptId) ?? { created: [], deleted: [] };
    if (new Set(created.map((delivery) => delivery.webhookId)).size > 1) {
      problems["out of order"].push(`receipt ${receiptId}: two different created events`);
    }
    const erasure = erasures.surelyTook(receiptId);
    const heardOfErasure = erasure?.eventId === undefined ? undefined : erasedAt.get(erasure.eventId);
    if (heardOfErasure !== undefined && [...created.map((delivery) => delivery.at), ...deleted].some((at) => at > heardOfErasure)) {
      problems["out of order"].push(`receipt ${receiptId}: an event arrived after its app user's erasure`);
    }
    // An erasure removes the outbox rows of its receipts, delivered ones too.
    const erased = erasures.mayHaveTaken(receiptId);
    if (!recorded.has(receiptId) && !erased) problems["event of no receipt"].push(`receipt ${receiptId}: events with no outbox row`);
    if (stored.has(receiptId)) {
      if (created.length === 0) problems.lost.push(`receipt ${receiptId}: stored, its created event never arrived`);
      if (deleted.length > 0) problems["event of no receipt"].push(`receipt ${receiptId}: a deleted event, yet still stored`);
      continue;
    }
    if (deleted.length === 0) {
      if (!erased) problems.lost.push(`receipt ${receiptId}: gone, its deleted event never arrived`);
      continue;
    }
    if (created.length === 0) createdSkipped += 1;
    else if (created[0]!.at > Math.min(...deleted)) problems["out of order"].push(`receipt ${receiptId}: created arrived after deleted`);
  }
  const sorted = delays.sort((a, b) => a - b);
  const events = [...applied.values()];
  return {
    created: events.filter((delivery) => delivery.event.type === "receipt.created").length,
    deleted: events.filter((delivery) => delivery.event.type === "receipt.deleted").length,
    createdSkipped,
    drCreated,
    duplicates,
    erased: erasedAt.size,
    receiptsErased: erasures.records.reduce((sum, erasure) => sum + (erasure.receiptsErased ?? 0), 0),
    racing: erasures.racing(),
    delayMs: { p50: percentile(sorted, 0.5), p99: percentile(sorted, 0.99), max: sorted.at(-1) ?? 0 },
  };
}

type AppliedDelivery = Delivery & { event: NonNullable<Delivery["event"]> };

function checkStore(input: ReconcileInput, erasures: Erasures, problems: Record<Problem, string[]>): void {
  const { store, now } = input;
  const stored = new Set(store.receipts.map((receipt) => receipt.receipt_id));
  for (const receipt of store.receipts) {
    const erasure = erasures.took(receipt.receipt_id);
    if (erasure) {
      problems["survived erasure"].push(
        `receipt ${receipt.receipt_id}: created ${receipt.created_at}, still stored after the erasure of ${erasure.appUserId} at ${erasure.occurredAt}`,
      );
    }
  }
  const deleted = new Set(store.outbox.filter((row) => row.type === "receipt.deleted").map((row) => row.receipt_id));
  for (const row of store.outbox) {
    if (row.delivered_at === null) problems.undelivered.push(`event ${row.event_id} (${row.type}, receipt ${row.receipt_id})`);
    else if (Date.parse(row.delivered_at) < now - OUTBOX_RETENTION_MS) problems["orphan row"].push(`outbox ${row.event_id}: past its retention`);
    if (row.type === "receipt.deleted" && stored.has(row.receipt_id)) {
      problems["orphan row"].push(`outbox ${row.event_id}: a deletion recorded, its receipt still stored`);
    }
  }
  for (const row of store.failed) problems["needs operator"].push(`failed notice ${row.event_id} (receipt ${row.receipt_id})`);
  // A claim made ahead whose call stopped, or lost to another call's, names a receipt never
  // stored; that is right as long as no answer named it (an answer names only a stored receipt).
  // Nor does an erasure mark it: it holds no app_user_id, and its receipt's own record is marked.
  const answered = new Set(input.load.requests.filter((request) => request.route === "add" && request.status === 200).map((request) => request.receiptId));
  for (const key of store.keys) {
    const claimedAhead =
      input.shardOf(key.receipt_id) !== key.shard && (!answered.has(key.receipt_id) || erasures.took(key.receipt_id) !== undefined);
    if (Date.parse(key.created_at) < now - IDEMPOTENCY_RETENTION_MS) problems["orphan row"].push(`key ${key.idempotency_key}: past its retention`);
    else if (key.erased_at === null && !claimedAhead && !stored.has(key.receipt_id) && !deleted.has(key.receipt_id)) {
      problems["orphan row"].push(`key ${key.idempotency_key}: its receipt ${key.receipt_id} was never stored`);
    }
  }
}

// A DR Retail receipt is pushed with its format, and a model whose number is the marker, whose
// total is the body's paid total and whose lines add up to it (docs/api.md#dr-retail-mapping).
function sameDrModel(expected: { format: string; total: number } | undefined, pushed: Delivery["drModel"], marker: string | undefined): boolean {
  if (!expected || !pushed) return false;
  return pushed.format === expected.format && pushed.marker === marker && pushed.total === expected.total && pushed.linesTotal === expected.total;
}

function markerOf(receiptText: string | undefined): string | undefined {
  if (receiptText === undefined) return undefined;
  try {
    const marker = (JSON.parse(receiptText) as { pos_receipt_number?: unknown }).pos_receipt_number;
    return typeof marker === "string" ? marker : undefined;
  } catch {
    return undefined;
  }
}

// A UUIDv7's first 48 bits are its ms since the epoch; undefined for an ID of another shape.
function createdAtOfId(receiptId: string): string | undefined {
  const hex = receiptId.replaceAll("-", "");
  if (!/^[0-9a-f]{12}7/i.test(hex)) return undefined;
  return new Date(Number.parseInt(hex.slice(0, 12), 16)).toISOString();
}
