/**
 * D1 statements for receipts: add with its Idempotency-Key records (migrations 0001, 0002), and
 * delete with the notice it records in the outbox (0003) and its audit record (0005). Every function takes the database it
 * works on: receipts are to be spread over several databases, and the caller picks the one.
 */
import type { AddResponse } from "../shared/schemas.ts";
import type { CreationNotice, DeletionNotice } from "../shared/types.ts";
import { deleteInRounds } from "./rounds.ts";
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
  /** ISO 8601 in UTC with milliseconds, as `Date.prototype.toISOString` writes it. */
  created_at: string;
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
  /** The key was used before for the same request: nothing was stored, here is the first answer. */
  | { kind: "replayed"; response: AddResponse }
  /** The key was used before for a different request: nothing was stored. */
  | { kind: "conflict" };

/**
 * Stores a receipt in one D1 round trip, and reports the database's size after it (for the fill
 * check). With a claim, the key record and the receipt go in one batch, which D1 runs as a
 * transaction and never beside another write: the receipt is inserted only if the key record is
 * this request's, so of any number of requests racing with one key exactly one adds a receipt
 * and every other one reads that request's answer. A transient D1 error is retried: a second
 * run after a first that committed finds this request's own receipt or key record, and answers
 * as the first would have.
 */
export async function addReceipt(
  db: D1Database,
  receipt: StoredReceipt,
  event: CreationNotice,
  claim?: IdempotencyClaim,
): Promise<AddOutcome & { sizeAfter: number }> {
  return retryTransient(() => addReceiptOnce(db, receipt, event, claim));
}

/**
 * What an earlier add with this key stored on a shard other than the one a retry now goes to
 * (src/storage/placement.ts `placeReceipt`): its answer, a conflict, or undefined when this shard
 * holds no live record of the key.
 */
export async function earlierAdd(
  db: D1Database,
  clientId: string,
  claim: IdempotencyClaim,
  now: Date,
): Promise<AddOutcome | undefined> {
  const row = await retryTransient(() =>
    db.prepare(READ_LIVE_KEY).bind(clientId, claim.key, idempotencyCutoff(now)).first<KeyRow>(),
  );
  if (!row) return undefined;
  if (row.fingerprint !== claim.fingerprint) return { kind: "conflict" };
  return { kind: "replayed", response: JSON.parse(row.response) as AddResponse };
}

async function addReceiptOnce(
  db: D1Database,
  receipt: StoredReceipt,
  event: CreationNotice,
  claim?: IdempotencyClaim,
): Promise<AddOutcome & { sizeAfter: number }> {
  // Recorded only where this very request's receipt went in: a replay records no second event.
  const recordEvent = db
    .prepare(RECORD_CREATED_IF_STORED)
    .bind(event.event_id, receipt.receipt_id, JSON.stringify(event), event.occurred_at);
  const values = [
    receipt.receipt_id,
    receipt.chain_id,
    receipt.client_id,
    receipt.app_user_id,
    receipt.body,
    receipt.created_at,
  ];
  if (!claim) {
    // A retry after a first run that committed inserts nothing and still means "added".
    const [, recorded] = await db.batch([db.prepare(INSERT_RECEIPT).bind(...values), recordEvent]);
    return { kind: "added", sizeAfter: recorded!.meta.size_after };
  }
  const [, , , read] = await db.batch([
    db
      .prepare(CLAIM_KEY)
      .bind(
        receipt.client_id,
        claim.key,
        claim.fingerprint,
        receipt.receipt_id,
        JSON.stringify(claim.response),
        receipt.created_at,
        idempotencyCutoff(new Date(receipt.created_at)),
      ),
    db.prepare(INSERT_RECEIPT_IF_KEY_IS_OURS).bind(...values, claim.key),
    recordEvent,
    db.prepare(READ_KEY).bind(receipt.client_id, claim.key),
  ]);
  const row = (read as D1Result<KeyRow>).results[0];
  if (!row) throw new Error("idempotency key row missing after its claim");
  const sizeAfter = read!.meta.size_after;
  if (row.receipt_id === receipt.receipt_id) return { kind: "added", sizeAfter };
  if (row.fingerprint !== claim.fingerprint) return { kind: "conflict", sizeAfter };
  return { kind: "replayed", response: JSON.parse(row.response) as AddResponse, sizeAfter };
}

/** The fields of a receipt that delete compares with the request's headers. */
export interface ReceiptOwner {
  client_id: string;
  chain_id: string;
  app_user_id: string;
}

/** What the delete operation's batch did: deleted, or why not (the receipt as it was, or none). */
export type DeleteOutcome = { deleted: true } | { deleted: false; receipt: ReceiptOwner | null };

/**
 * Deletes the notice's receipt, records the notice in the outbox and the deletion in the audit
 * trail, in one D1 batch (one round trip, one transaction), only if the receipt exists with the
 * notice's client_id, chain_id and app_user_id. Every write carries that condition, so of two
 * racing deletes exactly one removes the receipt and records a notice and an audit record; the
 * other sees no receipt. A transient D1 error is retried with the same notice: a second run after
 * a first that committed finds the notice's own outbox row, and answers "deleted" as the first
 * would have. `requestId` is the request reference the audit record keeps.
 */
export async function deleteReceiptWithNotice(
  db: D1Database,
  notice: DeletionNotice,
  requestId: string,
): Promise<DeleteOutcome> {
  return retryTransient(() => deleteOnce(db, notice, requestId));
}

async function deleteOnce(db: D1Database, notice: DeletionNotice, requestId: string): Promise<DeleteOutcome> {
  const { event_id, occurred_at, receipt_id, client_id, chain_id, app_user_id } = notice;
  const owned = [receipt_id, client_id, chain_id, app_user_id] as const;
  const [recorded, before, , , removal] = await db.batch([
    db.prepare(READ_OWN_NOTICE).bind(event_id),
    db.prepare(READ_OWNER).bind(receipt_id),
    db.prepare(RECORD_NOTICE_IF_OWNED).bind(...owned, event_id, JSON.stringify(notice), occurred_at),
    db.prepare(AUDIT_IF_OWNED).bind(...owned, occurred_at, requestId),
    db.prepare(DELETE_IF_OWNED).bind(...owned),
  ]);
  if (removal!.meta.changes === 1 || recorded!.results.length > 0) return { deleted: true };
  return { deleted: false, receipt: (before!.results[0] as ReceiptOwner | undefined) ?? null };
}

/** Deletes Idempotency-Key records older than the window, in bounded rounds; returns how many. */
export async function deleteExpiredIdempotencyKeys(db: D1Database, now: Date): Promise<number> {
  return deleteInRounds(db, DELETE_EXPIRED_KEYS, idempotencyCutoff(now));
}

interface KeyRow {
  receipt_id: string;
  fingerprint: string;
  response: string;
}

// Records created before this instant are expired. ISO strings of one format sort as time does.
function idempotencyCutoff(now: Date): string {
  return new Date(now.getTime() - IDEMPOTENCY_WINDOW_MS).toISOString();
}

const INSERT_RECEIPT = `
  INSERT INTO receipts (receipt_id, chain_id, client_id, app_user_id, body, created_at)
  VALUES (?1, ?2, ?3, ?4, ?5, ?6)
  ON CONFLICT (receipt_id) DO NOTHING`;

// An expired record counts as absent, so it is taken over rather than kept.
const CLAIM_KEY = `
  INSERT INTO idempotency_keys (client_id, idempotency_key, fingerprint, receipt_id, response, created_at)
  VALUES (?1, ?2, ?3, ?4, ?5, ?6)
  ON CONFLICT (client_id, idempotency_key) DO UPDATE SET
    fingerprint = excluded.fingerprint,
    receipt_id = excluded.receipt_id,
    response = excluded.response,
    created_at = excluded.created_at
  WHERE idempotency_keys.created_at < ?7`;

const INSERT_RECEIPT_IF_KEY_IS_OURS = `
  INSERT INTO receipts (receipt_id, chain_id, client_id, app_user_id, body, created_at)
  SELECT ?1, ?2, ?3, ?4, ?5, ?6
  WHERE EXISTS (
    SELECT 1 FROM idempotency_keys WHERE client_id = ?3 AND idempotency_key = ?7 AND receipt_id = ?1
  )
  ON CONFLICT (receipt_id) DO NOTHING`;

const RECORD_CREATED_IF_STORED = `
  INSERT INTO notice_outbox (event_id, receipt_id, payload, created_at)
  SELECT ?1, ?2, ?3, ?4 WHERE EXISTS (SELECT 1 FROM receipts WHERE receipt_id = ?2)
  ON CONFLICT (event_id) DO NOTHING`;

const READ_LIVE_KEY = `
  SELECT receipt_id, fingerprint, response FROM idempotency_keys
  WHERE client_id = ?1 AND idempotency_key = ?2 AND created_at >= ?3`;

const READ_KEY = `
  SELECT receipt_id, fingerprint, response FROM idempotency_keys
  WHERE client_id = ?1 AND idempotency_key = ?2`;

const DELETE_EXPIRED_KEYS = `
  DELETE FROM idempotency_keys WHERE rowid IN (
    SELECT rowid FROM idempotency_keys WHERE created_at < ?1 ORDER BY created_at LIMIT ?2
  )`;

// Present only when an earlier run of this very delete committed.
const READ_OWN_NOTICE = "SELECT 1 AS found FROM notice_outbox WHERE event_id = ?1";

// What the receipt held before the delete: tells "no receipt" from "fields differ".
const READ_OWNER = "SELECT client_id, chain_id, app_user_id FROM receipts WHERE receipt_id = ?1";

const RECORD_NOTICE_IF_OWNED = `
  INSERT INTO notice_outbox (event_id, receipt_id, payload, created_at)
  SELECT ?5, receipt_id, ?6, ?7 FROM receipts
  WHERE receipt_id = ?1 AND client_id = ?2 AND chain_id = ?3 AND app_user_id = ?4`;

const AUDIT_IF_OWNED = `
  INSERT INTO audit_log (at, action, receipt_id, chain_id, client_id, app_user, request_id)
  SELECT ?5, 'receipt.deleted', receipt_id, chain_id, client_id, app_user_id, ?6 FROM receipts
  WHERE receipt_id = ?1 AND client_id = ?2 AND chain_id = ?3 AND app_user_id = ?4`;

// The same condition as the notice's and the audit record's, so the receipt goes exactly when
// both were recorded.
const DELETE_IF_OWNED = `
  DELETE FROM receipts
  WHERE receipt_id = ?1 AND client_id = ?2 AND chain_id = ?3 AND app_user_id = ?4`;
