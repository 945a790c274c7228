/**
 * Receipts and their Idempotency-Key records (migrations 0001, 0002): add, which records the
 * receipt's created event in the outbox with the receipt, in one statement (0014), and delete,
 * which records the deleted event and the audit record (0005) in the same batch. Every function
 * takes the database it works on: receipts are spread over several databases, and the caller
 * picks the one.
 */
import type { AddResponse } from "../shared/schemas.ts";
import type { CreationNotice, DeletionNotice } from "../shared/types.ts";
import { archivedOwnerJoin } from "./archive/owners.ts";
import { auditDeletionIfOwned } from "./audit.ts";
import { fenced } from "./fences.ts";
import { eventColumns, eventRecorded, recordDeletedIfOwned } from "./outbox/statements.ts";
import { deleteInRounds } from "./rounds.ts";
import { bound, runBatch, statement, type Statement } from "./statement.ts";
import { retryTransient } from "./transient.ts";

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

/** What an add with an Idempotency-Key asks to remember under it. */
export interface IdempotencyClaim {
  key: string;
  /** Tells a retry of the same request from a different request under the same key. */
  fingerprint: string;
  /** The answer a retry within the window gets again. */
  response: AddResponse;
}

/** What became of an add. */
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

/**
 * Stores a receipt in one D1 round trip, and reports the database's size after it (for the fill
 * check). With a claim, the key record and the receipt go in one batch, which D1 runs as a
 * transaction and never beside another write: the receipt is inserted only if the key record is
 * this request's, so of any number of requests racing with one key exactly one adds a receipt
 * and every other one reads that request's answer. An erasure's fence (src/storage/fences.ts) of
 * the app user at or after created_at keeps the receipt and its event out: the add then counts as
 * stored and erased at once (docs/api.md#erasure). A transient D1 error is retried: a second
 * run after a first that committed finds this request's own receipt or key record, and answers
 * as the first would have.
 */
export async function storeReceipt(
  db: D1Database,
  receipt: FencedReceipt,
  event: CreationNotice,
  claim?: IdempotencyClaim,
): Promise<AddOutcome & { sizeAfter: number }> {
  return retryTransient(() => storeReceiptOnce(db, receipt, event, claim));
}

/**
 * What an earlier add with this key stored on a shard other than the one a retry now goes to
 * (src/storage/placement.ts `placeReceipt`): its answer, a conflict, or undefined when this shard
 * holds no live record of the key.
 */
export async function earlierAdd(
  db: D1Database,
  clientId: string,
  appUserId: string,
  claim: Pick<IdempotencyClaim, "key" | "fingerprint">,
  now: Date,
): Promise<AddOutcome | undefined> {
  const row = await retryTransient(() =>
    bound(db, readKey(clientId, claim.key, idempotencyCutoff(now))).first<KeyRow>(),
  );
  if (!row) return undefined;
  if (row.fingerprint !== claim.fingerprint) return { kind: "conflict" };
  return replayOf(row, appUserId);
}

/**
 * Claims the key on a shard that may hold or take this key's first call but will not store this
 * receipt (docs/storage.md "One key, one receipt"): records the key with this request's answer,
 * whose receipt_id names the shard that will store the receipt, or finds the record an earlier
 * call left. One D1 round trip. A record written here keeps no app_user_id (the shard holds no
 * receipt an erasure would find it by): a replay gives the caller's own back.
 */
export async function claimKeyAhead(db: D1Database, receipt: FencedReceipt, claim: IdempotencyClaim): Promise<KeyRecord> {
  const [claimed] = await retryTransient(() => runBatch(db, [claimKey(receipt, claim, { keepUser: false })]));
  const row = (claimed as D1Result<KeyRow>).results[0];
  if (!row) throw new Error("idempotency key row missing after its claim");
  return row;
}

/**
 * Stores a receipt whose key was claimed on another shard first ({@link claimKeyAhead}), by this
 * call or by an earlier one whose answer a replay is giving: inserts the receipt with its key
 * record only while this shard holds no live record of the key, in one batch (one round trip).
 * So the receipt is stored at most once, however many calls complete it, and never again after
 * a delete or an erasure removed it: its key record stays for the window. Returns the key's
 * record on this shard, which names the receipt this shard holds for the key.
 *
 * With `givingWay`, a claim made ahead here for that receipt, which can never be stored (its own
 * shard holds another call's record of the key), is removed first in the same batch, so that
 * this receipt takes its place (docs/storage.md "One key, one receipt").
 */
export async function completeClaimedAdd(
  db: D1Database,
  receipt: FencedReceipt,
  event: CreationNotice,
  claim: IdempotencyClaim,
  givingWay?: string,
): Promise<KeyRecord & { sizeAfter: number }> {
  const giveWay = givingWay === undefined ? [] : [dropClaim(receipt.client_id, claim.key, givingWay)];
  return retryTransient(async () => {
    const [inserted, claimed] = (
      await runBatch(db, [
        ...giveWay,
        insertReceipt(receipt, event, { unclaimedKey: claim.key, liveFrom: idempotencyCutoff(new Date(receipt.created_at)) }),
        claimKey(receipt, claim),
      ])
    ).slice(giveWay.length);
    const row = (claimed as D1Result<KeyRow>).results[0];
    if (!row) throw new Error("idempotency key row missing after its claim");
    return { ...row, sizeAfter: inserted!.meta.size_after };
  });
}

/** An Idempotency-Key's record as a shard holds it. */
export interface KeyRecord {
  receipt_id: string;
  fingerprint: string;
  /** The first call's answer; without app_user_id when the record was erased or claimed ahead. */
  response: string;
  erased_at: string | null;
}

/** The answer a key's record gives a retry whose fingerprint it matched (see {@link replayOf}). */
export function replayOfRecord(row: KeyRecord, appUserId: string): { kind: "replayed"; response: AddResponse } {
  return replayOf(row, appUserId);
}

async function storeReceiptOnce(
  db: D1Database,
  receipt: FencedReceipt,
  event: CreationNotice,
  claim?: IdempotencyClaim,
): Promise<AddOutcome & { sizeAfter: number }> {
  if (!claim) {
    // A retry after a first run that committed inserts nothing and still means "added"; only a
    // fence leaves no receipt behind.
    const [, held] = await runBatch(db, [insertReceipt(receipt, event), readStored(receipt.receipt_id)]);
    const kind = held!.results.length > 0 ? "added" : "erased";
    return { kind, sizeAfter: held!.meta.size_after };
  }
  const [claimed, inserted] = await runBatch(db, [claimKey(receipt, claim), insertReceipt(receipt, event, { ownKey: claim.key })]);
  const row = (claimed as D1Result<KeyRow>).results[0];
  if (!row) throw new Error("idempotency key row missing after its claim");
  const sizeAfter = inserted!.meta.size_after;
  if (row.receipt_id === receipt.receipt_id) return { kind: row.erased_at === null ? "added" : "erased", sizeAfter };
  if (row.fingerprint !== claim.fingerprint) return { kind: "conflict", sizeAfter };
  return { ...replayOf(row, receipt.app_user_id), sizeAfter };
}

/**
 * The first answer again. A record an erasure kept, or one claimed ahead on another shard than
 * the receipt's, holds no app_user_id: the retry's own, which the fingerprint matched, takes its
 * place, where the first answer had it.
 */
function replayOf(row: KeyRow, appUserId: string): { kind: "replayed"; response: AddResponse } {
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
  db: D1Database,
  notice: DeletionNotice,
  userKey: string,
  requestId: string,
): Promise<DeleteOutcome> {
  return retryTransient(() => deleteOnce(db, notice, userKey, requestId));
}

async function deleteOnce(db: D1Database, notice: DeletionNotice, userKey: string, requestId: string): Promise<DeleteOutcome> {
  const [before, , , removal] = await runBatch(db, [
    readOwner(notice, userKey),
    recordDeletedIfOwned(notice, userKey),
    auditDeletionIfOwned(notice, userKey, notice.occurred_at, requestId),
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

type KeyRow = KeyRecord;

// Records created before this instant are expired. ISO strings of one format sort as time does.
function idempotencyCutoff(now: Date): string {
  return new Date(now.getTime() - IDEMPOTENCY_WINDOW_MS).toISOString();
}

/**
 * The one receipt insert, with its created event: into the view `receipt_format_adds` (migrations 0014, 0015),
 * whose trigger writes the receipt and records the event only where this insert stored the
 * receipt, so both cost one statement. Never where an erasure's fence of the app user stands at
 * or after its created_at. With `ownKey`, only while that Idempotency-Key's record (claimed just
 * before in the same batch) names this receipt; with `unclaimedKey`, only while the shard holds no
 * live record of that key (the receipt of a claim made ahead, docs/storage.md "One key, one receipt").
 */
function insertReceipt(
  receipt: FencedReceipt,
  event: CreationNotice,
  key?: { ownKey: string } | { unclaimedKey: string; liveFrom: string },
): Statement {
  const { event_id, event_payload, event_at } = eventColumns(event);
  const values = [receipt.receipt_id, receipt.chain_id, receipt.client_id, receipt.app_user_id, receipt.body, receipt.created_at, receipt.user_key];
  // With the key claimed just before in the same batch: only while its record names this receipt.
  // Before the key's claim on the receipt's shard: only while the shard holds no live record of it.
  const keyCondition =
    key === undefined
      ? ""
      : "ownKey" in key
        ? " AND EXISTS (SELECT 1 FROM idempotency_keys WHERE client_id = ?3 AND idempotency_key = ?13 AND receipt_id = ?1)"
        : " AND NOT EXISTS (SELECT 1 FROM idempotency_keys WHERE client_id = ?3 AND idempotency_key = ?13 AND created_at >= ?14)";
  const keyValues = key === undefined ? [] : "ownKey" in key ? [key.ownKey] : [key.unclaimedKey, key.liveFrom];
  return statement(
    `INSERT INTO receipt_format_adds (receipt_id, chain_id, client_id, app_user_id, body, format, mapped, created_at, event_id, event_payload, event_at)
    SELECT ?1, ?2, ?3, ?4, ?5, ?11, ?12, ?6, ?8, ?9, ?10 WHERE NOT ${fenced("?7", "?6")}${keyCondition}`,
    ...values,
    event_id,
    event_payload,
    event_at,
    receipt.format?.name ?? null,
    receipt.format?.mapped ?? null,
    ...keyValues,
  );
}

// Whether the receipt is stored: after an unkeyed insert, tells a fenced add from a retry.
function readStored(receiptId: string): Statement {
  return statement("SELECT 1 AS stored FROM receipts WHERE receipt_id = ?1", receiptId);
}

// An expired record counts as absent, so it is taken over rather than kept. A live one is
// "updated" to itself, so that RETURNING hands back the key's record in either case: the batch
// needs no statement of its own to read it (a replay pays one row written for that). Under an
// erasure's fence the record is made in the erased form an erasure leaves (the receipt is never
// stored).
function claimKey(receipt: FencedReceipt, claim: IdempotencyClaim, { keepUser = true } = {}): Statement {
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

// A key's record, only while it names `receiptId`.
function dropClaim(clientId: string, key: string, receiptId: string): Statement {
  return statement("DELETE FROM idempotency_keys WHERE client_id = ?1 AND idempotency_key = ?2 AND receipt_id = ?3", clientId, key, receiptId);
}

// A key's record, only one created at or after `liveFrom`.
function readKey(clientId: string, key: string, liveFrom: string): Statement {
  return statement(
    `SELECT receipt_id, fingerprint, response, erased_at FROM idempotency_keys
    WHERE client_id = ?1 AND idempotency_key = ?2 AND created_at >= ?3`,
    clientId,
    key,
    liveFrom,
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
