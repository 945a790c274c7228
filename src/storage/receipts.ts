/**
 * Receipts and their Idempotency-Key records (migrations 0001, 0002), and the one place where add
 * and delete are carried out on a shard, each batch under the one retry policy
 * (src/storage/transient.ts `runOnShard`). Add: placement decides which shards an add touches and
 * what it claims, and carries that plan out (src/storage/placement.ts `planAdd`, `storeAsPlanned`),
 * one batch of {@link storeReceipt} in the common case; the key's claims across shards, where a key
 * and a shard's change meet, are src/storage/key-claims.ts, which builds on this file. The receipt's created event goes into the outbox with
 * the receipt, in one statement (0014). Delete records the deleted event and the audit record (0005) in the batch that removes
 * the receipt. Docs/storage.md "Add's path" and "Delete's path" follow both step by step.
 */
import { v7 as uuidv7 } from "uuid";
import type { AddResponse } from "../shared/schemas.ts";
import { idOnShard } from "../shared/shard-ids.ts";
import type { CreationNotice, DeletionNotice } from "../shared/types.ts";
import { archivedOwnerJoin } from "./archive/owners.ts";
import { auditDeletionIfOwned } from "./audit.ts";
import { copyForExports } from "./export.ts";
import { fenced } from "./fences.ts";
import { eventColumns, eventRecorded, recordDeletedIfOwned } from "./outbox/statements.ts";
import { deleteInRounds } from "./rounds.ts";
import type { Shard } from "./shards.ts";
import { statement, type Statement } from "./statement.ts";
import { deflatedTexts } from "./stored-body.ts";
import { runOnShard, type ShardDb } from "./transient.ts";

/** How long a client's Idempotency-Key is remembered (docs/api.md#add). */
export const IDEMPOTENCY_WINDOW_MS = 24 * 60 * 60 * 1000;

/** A receipt row. `body` is the JSON text exactly as the client sent it. */
export interface StoredReceipt {
  receipt_id: string;
  chain_id: string;
  client_id: string;
  app_user_id: string;
  body: string;
  /**
   * For a receipt added in a published format (docs/api.md#dr-retail): its format, such as
   * `dr-retail/v1.1`, and `mapped`, the JSON text of the receipt in our model. Absent for our
   * own shape, whose body is that model.
   */
  format?: { name: string; mapped: string };
  /** ISO 8601 in UTC with milliseconds, as `Date.prototype.toISOString` writes it. */
  created_at: string;
}

/**
 * A receipt to store, with the keyed hash of its app_user_id (src/storage/erasure.ts
 * `pseudonym`): an erasure's fence names the app user by it.
 */
export interface FencedReceipt extends StoredReceipt {
  user_key: string;
}

/**
 * A new receipt as the client sent it, with the keyed hash of its app_user_id that erasure fences
 * name; its ID and time are given where it is stored.
 */
export type NewReceipt = Omit<FencedReceipt, "receipt_id" | "created_at">;

/** Makes a receipt's created event, whose event_id names the shard. */
export type NewEvent = (data: AddResponse["data"], shard: Shard) => CreationNotice;

/** What an add with an Idempotency-Key asks to remember under it. */
export interface IdempotencyClaim {
  key: string;
  /** Tells a retry of the same request from a different request under the same key. */
  fingerprint: string;
  /** The answer a retry within the window gets again. */
  response: AddResponse;
  /**
   * Set where the key was claimed on other shards first: the receipt goes in only while this shard
   * holds no live record of the key, then the claim; `givingWay` names a losing crossed claim here.
   */
  claimedAhead?: { givingWay?: string };
}

/**
 * What placement decided for one add (src/storage/placement.ts `planAdd`), as plain data: the
 * shards the add touches, and the key and fingerprint it claims. {@link storeAsPlanned} carries
 * it out and decides nothing of where.
 */
export interface AddPlan {
  /** Every shard; with a key, in the key's order, which settles crossed claims. */
  shards: readonly Shard[];
  /** Where the receipt goes; none when every shard is closed. */
  target?: Shard;
  /** Where it goes under fresh IDs when its event would have committed too late on the target. */
  again?: Shard;
  /**
   * With an Idempotency-Key: the key, the request's fingerprint, and the shards to claim the key on
   * before the target, in the key's order (docs/storage.md "One key, one receipt"); with no
   * target, the shards to ask for the key's earlier add.
   */
  keyed?: { key: string; fingerprint: string; ahead: readonly Shard[] };
}

/** What became of an add, with the answer it gets. */
export type Stored =
  | { kind: "added"; response: AddResponse; shard: Shard; event: CreationNotice }
  | { kind: "replayed"; response: AddResponse }
  /** Stored and erased at once (an erasure's fence): the answer as if stored, no event to send. */
  | { kind: "erased"; response: AddResponse }
  | { kind: "conflict" };

/** Every shard is closed: a new receipt has nowhere to go. */
export class NoOpenShardError extends Error {
  override name = "NoOpenShardError";
  constructor() {
    super("no open shard: every shard is closed");
  }
}

/** One add as its plan is carried out. */
export interface Add {
  plan: AddPlan;
  receipt: NewReceipt;
  newEvent: NewEvent;
}

/**
 * Stores a receipt in one D1 round trip, and reports the database's size after it (for the fill
 * check) and, with a claim, the key's record the batch leaves. With a claim, the key record and
 * the receipt go in one batch, which D1 runs as a transaction and never beside another write: the
 * receipt is inserted only if the key record is this request's, so of any number of requests
 * racing with one key exactly one adds a receipt and every other one reads that request's answer.
 * A claim `claimedAhead` (the key was claimed on other shards first, by this call or by an earlier
 * one whose receipt a replay makes good) inserts the receipt only while this shard holds no live
 * record of the key, then claims it: so the receipt is stored at most once, however many calls
 * complete it, and never again after a delete or an erasure removed it (its key record stays for
 * the window); `givingWay` names a claim made ahead here for a receipt that can never be stored,
 * removed first so that this receipt takes its place (docs/storage.md "Crossed claims").
 *
 * An erasure's fence (src/storage/fences.ts) of the app user at or after created_at keeps the
 * receipt and its event out: the add then counts as stored and erased at once
 * (docs/api.md#erasure). A transient D1 error is retried: a second run after a first that
 * committed finds this request's own receipt or key record, and answers as the first would have.
 */
export async function storeReceipt(
  shard: ShardDb,
  receipt: FencedReceipt,
  event: CreationNotice,
  claim?: IdempotencyClaim,
): Promise<AddOutcome & { sizeAfter: number; record?: KeyRecord }> {
  // The row's texts, deflated before the batch, which stays one round trip.
  const deflated = await deflatedTexts({ body: receipt.body, mapped: receipt.format?.mapped ?? null });
  if (!claim) {
    // A retry after a first run that committed inserts nothing and still means "added"; only a
    // fence leaves no receipt behind.
    const [, held] = await runOnShard(shard, [insertReceipt(receipt, deflated, event), readStored(receipt.receipt_id)]);
    const kind = held!.results.length > 0 ? "added" : "erased";
    return { kind, sizeAfter: held!.meta.size_after };
  }
  const ahead = claim.claimedAhead;
  const giveWay = ahead?.givingWay === undefined ? [] : [dropClaim(receipt.client_id, claim.key, ahead.givingWay)];
  const results = await runOnShard(
    shard,
    ahead
      ? [...giveWay, insertReceipt(receipt, deflated, event, { unclaimedKey: claim.key }), claimKey(receipt, claim)]
      : [claimKey(receipt, claim), insertReceipt(receipt, deflated, event, { ownKey: claim.key })],
  );
  const [claimed, inserted] = ahead ? [results.at(-1), results.at(-2)] : results;
  const record = keyRecordOf(claimed!);
  return { ...outcomeOf(record, receipt.receipt_id, claim, receipt.app_user_id), record, sizeAfter: inserted!.meta.size_after };
}

/** What became of an add on its shard. */
export type AddOutcome =
  | { kind: "added" }
  /**
   * An erasure of the app user at or after created_at fenced the shard first: the receipt counts
   * as stored and then erased, so nothing was stored, no event recorded, and the key record (if
   * any) is kept in erased form.
   */
  | { kind: "erased" }
  /** The key was used before for the same request: nothing was stored, here is the first answer. */
  | { kind: "replayed"; response: AddResponse }
  /** The key was used before for a different request: nothing was stored. */
  | { kind: "conflict" };

/** An Idempotency-Key's record as a shard holds it. */
export interface KeyRecord {
  receipt_id: string;
  fingerprint: string;
  /** The first call's answer; without app_user_id when the record was erased or claimed ahead. */
  response: string;
  erased_at: string | null;
}

// What a key's record says to the call that claimed it for `receiptId`: its receipt stored (or
// erased at once), or, where an earlier call recorded the key, a conflict or the first answer again.
function outcomeOf(record: KeyRecord, receiptId: string, claim: Pick<IdempotencyClaim, "fingerprint">, appUserId: string): AddOutcome {
  if (record.receipt_id === receiptId) return { kind: record.erased_at === null ? "added" : "erased" };
  if (record.fingerprint !== claim.fingerprint) return { kind: "conflict" };
  return replayOf(record, appUserId);
}

/**
 * The receipt of `add` as it is stored on `shard`: its answer, row, claim (with a key) and created
 * event. Its data is given for the receipt of a claim a replay makes good, else new: one clock
 * reading for ID and time, as the ID's time is created_at (docs/api.md), also when the clock moves
 * on between two readings. UUIDv7: the time in front keeps inserts at the end of the primary key's
 * b-tree. uuid's default spends 31 of the random bits on a counter within one millisecond, which
 * makes neighbouring IDs partly predictable; fresh random bits for every ID keep them unguessable:
 * the 62 of rand_b, as rand_a carries the shard's tag.
 */
export function receiptOn(add: Add, shard: Shard, given?: AddResponse["data"]) {
  const { receipt, plan } = add;
  const now = Date.now();
  const data = given ?? {
    receipt_id: idOnShard(uuidv7({ msecs: now, random: crypto.getRandomValues(new Uint8Array(16)) }), shard),
    chain_id: receipt.chain_id,
    client_id: receipt.client_id,
    app_user_id: receipt.app_user_id,
    created_at: new Date(now).toISOString(),
  };
  const row: FencedReceipt = { ...data, body: receipt.body, ...(receipt.format && { format: receipt.format }), user_key: receipt.user_key };
  const response: AddResponse = { data, status: "OK", status_code: 200 };
  const claim: IdempotencyClaim | undefined = plan.keyed && { key: plan.keyed.key, fingerprint: plan.keyed.fingerprint, response };
  return { row, claim, event: add.newEvent(data, shard), response };
}

/** The key's record a claim's RETURNING hands back. */
export function keyRecordOf(claimed: D1Result): KeyRecord {
  const row = (claimed as D1Result<KeyRecord>).results[0];
  if (!row) throw new Error("idempotency key row missing after its claim");
  return row;
}

/**
 * The first answer again. A record an erasure kept, or one claimed ahead on another shard than
 * the receipt's, holds no app_user_id: the retry's own, which the fingerprint matched, takes its
 * place, where the first answer had it.
 */
export function replayOf(row: KeyRecord, appUserId: string): { kind: "replayed"; response: AddResponse } {
  const stored = JSON.parse(row.response) as AddResponse;
  if (stored.data.app_user_id !== undefined) return { kind: "replayed", response: stored };
  const { receipt_id, chain_id, client_id, created_at } = stored.data;
  const data = { receipt_id, chain_id, client_id, app_user_id: appUserId, created_at };
  return { kind: "replayed", response: { ...stored, data } };
}

/** The fields of a receipt that delete compares with the request's headers. */
export interface ReceiptOwner {
  client_id: string;
  chain_id: string;
  app_user_id: string;
}

/**
 * What the delete operation's batch did: deleted, or why not (the receipt's owner as it was, or
 * none, also for a receipt an erasure is on its way to; `archived` when the owner is the archived
 * receipt's, src/storage/archive/owners.ts, so that delete goes on to the archive only when it
 * matches the headers).
 */
export type DeleteOutcome = { deleted: true } | { deleted: false; receipt: ReceiptOwner | null; archived?: boolean };

/**
 * Deletes the receipt of a deleted event, records the event in the outbox and the deletion in the audit
 * trail, in one D1 batch (one round trip, one transaction), only if the receipt exists with the
 * notice's client_id, chain_id and app_user_id and no erasure's fence of `userKey` (the app
 * user's pseudonym) covers it (src/storage/ownership.ts). Every write carries that condition, so of two
 * racing deletes exactly one removes the receipt and records a notice and an audit record; the
 * other sees no receipt. A transient D1 error is retried with the same notice: a second run after
 * a first that committed finds the notice's own outbox row, and answers "deleted" as the first
 * would have. `requestId` is the request reference the audit record keeps.
 */
export async function deleteOwnedReceipt(
  shard: ShardDb,
  notice: DeletionNotice,
  userKey: string,
  requestId: string,
): Promise<DeleteOutcome> {
  const [before, , , , removal] = await runOnShard(shard, [
    readOwner(notice, userKey),
    recordDeletedIfOwned(notice, userKey),
    auditDeletionIfOwned(notice, userKey, notice.occurred_at, requestId),
    // An export of the app user running now reads the receipt from this copy (docs/api.md#export-cut).
    copyForExports(notice, userKey, notice.occurred_at),
    deleteIfOwned(notice, userKey),
  ]);
  const read = before!.results[0] as OwnerRow;
  if (removal!.meta.changes === 1 || read.recorded === 1) return { deleted: true };
  // The request's app user is being erased, and the erasure's fence covers this receipt: it is
  // as good as erased, whoever asks.
  if (read.fenced === 1) return { deleted: false, receipt: null };
  const { client_id, chain_id, app_user_id } = read;
  if (client_id !== null) return { deleted: false, receipt: { client_id, chain_id: chain_id!, app_user_id: app_user_id! } };
  if (read.archived_client_id === null) return { deleted: false, receipt: null };
  const archived = { client_id: read.archived_client_id, chain_id: read.archived_chain_id!, app_user_id: read.archived_app_user_id! };
  return { deleted: false, receipt: archived, archived: true };
}

interface OwnerRow {
  /** 1 when this deletion's event is in the outbox already: a retry's proof that its first run committed. */
  recorded: number;
  /** 1 when an erasure's fence of the request's app user covers the live receipt. */
  fenced: number;
  client_id: string | null;
  chain_id: string | null;
  app_user_id: string | null;
  archived_client_id: string | null;
  archived_chain_id: string | null;
  archived_app_user_id: string | null;
}

/** Deletes Idempotency-Key records older than the window, in bounded rounds; returns how many. */
export async function deleteExpiredIdempotencyKeys(db: D1Database, now: Date): Promise<number> {
  const cutoff = idempotencyCutoff(now);
  return deleteInRounds(db, (rows) =>
    statement(
      `DELETE FROM idempotency_keys WHERE (client_id, idempotency_key) IN (
        SELECT client_id, idempotency_key FROM idempotency_keys WHERE created_at < ?1 ORDER BY created_at LIMIT ?2)`,
      cutoff,
      rows,
    ),
  );
}

/** Records created before this instant are expired. ISO strings of one format sort as time does. */
export function idempotencyCutoff(now: Date): string {
  return new Date(now.getTime() - IDEMPOTENCY_WINDOW_MS).toISOString();
}

/**
 * The one receipt insert, with its created event: into the view `receipt_timely_adds` (migrations
 * 0014, 0015, 0022, 0025), whose trigger writes the receipt with its texts `deflated`
 * (./stored-body.ts) and records the event only where this insert stored the receipt, so both
 * cost one statement. Never where an erasure's fence of the app user stands at or after its
 * created_at: the trigger is told so, and holds such an add, answered as stored and erased at
 * once, to the bound of an event's commit all the same. With `ownKey`, only while that
 * Idempotency-Key's record (claimed just before in the same batch) names this receipt; with
 * `unclaimedKey`, only while the shard holds no live record of that key (the receipt of a claim
 * made ahead, docs/storage.md "One key, one receipt").
 */
function insertReceipt(
  receipt: FencedReceipt,
  deflated: Uint8Array,
  event: CreationNotice,
  key?: { ownKey: string } | { unclaimedKey: string },
): Statement {
  const { event_id, event_payload, event_at } = eventColumns(event);
  const values = [receipt.receipt_id, receipt.chain_id, receipt.client_id, receipt.app_user_id, deflated, receipt.created_at, receipt.user_key];
  // With the key claimed just before in the same batch: only while its record names this receipt.
  // Before the key's claim on the receipt's shard: only while the shard holds no live record of it.
  const keyCondition =
    key === undefined
      ? ""
      : "ownKey" in key
        ? " AND EXISTS (SELECT 1 FROM idempotency_keys WHERE client_id = ?3 AND idempotency_key = ?12 AND receipt_id = ?1)"
        : " AND NOT EXISTS (SELECT 1 FROM idempotency_keys WHERE client_id = ?3 AND idempotency_key = ?12 AND created_at >= ?13)";
  const keyValues = key === undefined ? [] : "ownKey" in key ? [key.ownKey] : [key.unclaimedKey, idempotencyCutoff(new Date(receipt.created_at))];
  return statement(
    `INSERT INTO receipt_timely_adds (receipt_id, chain_id, client_id, app_user_id, format, deflated, created_at, event_id, event_payload, event_at, fenced)
    SELECT ?1, ?2, ?3, ?4, ?11, ?5, ?6, ?8, ?9, ?10, ${fenced("?7", "?6")} WHERE 1${keyCondition}`,
    ...values,
    event_id,
    event_payload,
    event_at,
    receipt.format?.name ?? null,
    ...keyValues,
  );
}

// Whether the receipt is stored: after an unkeyed insert, tells a fenced add from a retry.
function readStored(receiptId: string): Statement {
  return statement("SELECT 1 AS stored FROM receipts WHERE receipt_id = ?1", receiptId);
}

/**
 * Claims an Idempotency-Key for a receipt. An expired record counts as absent, so it is taken
 * over rather than kept. A live one is "updated" to itself, so that RETURNING hands back the
 * key's record in either case: the batch needs no statement of its own to read it (a replay pays
 * one row written for that). Under an erasure's fence the record is made in the erased form an
 * erasure leaves (the receipt is never stored).
 */
export function claimKey(receipt: FencedReceipt, claim: IdempotencyClaim, { keepUser = true } = {}): Statement {
  const expired = "idempotency_keys.created_at < ?7";
  const response = keepUser ? "CASE WHEN fence.instant IS NULL THEN ?5 ELSE json_remove(?5, '$.data.app_user_id') END" : "json_remove(?5, '$.data.app_user_id')";
  return statement(
    `INSERT INTO idempotency_keys (client_id, idempotency_key, fingerprint, receipt_id, response, created_at, erased_at)
    SELECT ?1, ?2, ?3, ?4, ${response}, ?6, fence.instant
    FROM (SELECT MIN(instant) AS instant FROM erasure_fences WHERE user_key = ?8 AND instant >= ?6) AS fence
    WHERE 1
    ON CONFLICT (client_id, idempotency_key) DO UPDATE SET
      fingerprint = iif(${expired}, excluded.fingerprint, fingerprint),
      receipt_id = iif(${expired}, excluded.receipt_id, receipt_id),
      response = iif(${expired}, excluded.response, response),
      created_at = iif(${expired}, excluded.created_at, created_at),
      erased_at = iif(${expired}, excluded.erased_at, erased_at)
    RETURNING receipt_id, fingerprint, response, erased_at`,
    receipt.client_id,
    claim.key,
    claim.fingerprint,
    receipt.receipt_id,
    JSON.stringify(claim.response),
    receipt.created_at,
    idempotencyCutoff(new Date(receipt.created_at)),
    receipt.user_key,
  );
}

// What the receipt held before the delete, live or archived, which tells "no receipt" from
// "fields differ", and whether this deletion's event is recorded already: one statement, one row,
// always. An archived receipt deleted or erased has no owner row left, so it is "no receipt"
// without a look at R2.
function readOwner(notice: DeletionNotice, userKey: string): Statement {
  return statement(
    `SELECT ${eventRecorded("?2")} AS recorded, coalesce(${fenced("?3", "owner.created_at")}, 0) AS fenced,
      owner.client_id, owner.chain_id, owner.app_user_id,
      archived.client_id AS archived_client_id, archived.chain_id AS archived_chain_id,
      archived.app_user_id AS archived_app_user_id
    FROM (SELECT 1) LEFT JOIN receipts AS owner ON owner.receipt_id = ?1 ${archivedOwnerJoin("archived", "?1")}`,
    notice.receipt_id,
    notice.event_id,
    userKey,
  );
}

// The same condition as the event's and the audit record's, so the receipt goes exactly when
// both were recorded.
function deleteIfOwned(owner: ReceiptOwner & { receipt_id: string }, userKey: string): Statement {
  return statement(
    `DELETE FROM receipts WHERE receipt_id = ?1 AND client_id = ?2 AND chain_id = ?3 AND app_user_id = ?4
      AND NOT ${fenced("?5", "receipts.created_at")}`,
    owner.receipt_id,
    owner.client_id,
    owner.chain_id,
    owner.app_user_id,
    userKey,
  );
}

/** Removes a key's record, only while it names `receiptId`: a crossed claim giving way (src/storage/key-claims.ts). */
export function dropClaim(clientId: string, key: string, receiptId: string): Statement {
  return statement("DELETE FROM idempotency_keys WHERE client_id = ?1 AND idempotency_key = ?2 AND receipt_id = ?3", clientId, key, receiptId);
}
