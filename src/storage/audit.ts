/**
 * The audit trail (migration 0005, docs/api.md#audit): every statement on `audit_log`. The API
 * Worker's delete and cron job run them bound; the erasure and `npm run audit` run them too, and
 * the latter on Node (scripts/lib/d1.ts), so this file stays free of Workers types.
 */
import { archivedOwned, type FencedOwner } from "./archive/owners.ts";
import { liveOwned } from "./ownership.ts";
import { tombstoned } from "./archive/tombstones.ts";
import { enclose, statement, type SqlValue, type Statement } from "./statement.ts";

/** One audit record as `npm run audit` prints it (docs/api.md#audit). */
export interface AuditRecord {
  at: string;
  action: "receipt.deleted" | "app_user.erased";
  receipt_id: string | null;
  chain_id: string | null;
  /** The POS client, or `operator` for an erasure. */
  client_id: string;
  /** The app_user_id, or `hmac-sha256:<hex>` once that app user was erased. */
  app_user: string;
  /**
   * The delete's request reference; for an erasure, its ID (fixed by its first step) on its
   * records of receipts, its event's event_id on its own record.
   */
  request_id: string;
}

/** What `npm run audit` looks records up by, and the column that holds it. */
export const AUDIT_SUBJECTS = { receipt: "receipt_id", client: "client_id", chain: "chain_id" } as const;
/** A kind of thing `npm run audit` looks records up by. */
export type AuditSubject = keyof typeof AUDIT_SUBJECTS;

/** Where a page of records newest first ended: the next page starts below it. */
export interface AuditCursor {
  at: string;
  audit_id: number;
}

// The one insert: `rows` selects the columns of an AuditRecord, in that order.
function recordAudit(rows: Statement): Statement {
  return enclose(rows, (select) => `INSERT INTO audit_log (at, action, receipt_id, chain_id, client_id, app_user, request_id) ${select}`);
}

/**
 * The record of a delete at `at`, only while the receipt exists with these fields: in delete's
 * batch before the receipt's removal, under the same condition.
 */
export function auditDeletionIfOwned(
  owner: { receipt_id: string; client_id: string; chain_id: string; app_user_id: string },
  userKey: string,
  at: string,
  requestId: string,
): Statement {
  const condition = liveOwned({ receiptId: "?1", clientId: "?2", chainId: "?3", appUserId: "?4", userKey: "?7" });
  return deletionIf(condition, owner, at, requestId, userKey);
}

/**
 * The record of a delete at `at` of an archived receipt, only while its owner row has these
 * fields: in the archived delete's batch before that row's removal, under the same condition.
 */
export function auditArchivedDeletionIfOwned(
  owner: FencedOwner,
  at: string,
  requestId: string,
): Statement {
  const condition = archivedOwned({ receiptId: "?1", clientId: "?2", chainId: "?3", appUserId: "?4", userKey: "?7", createdAt: "?8" });
  return deletionIf(condition, owner, at, requestId, owner.user_key, owner.created_at);
}

// The record of a delete under `condition`, which may name the owner's fields as ?1 to ?4 and
// its own `conditionParams` from ?7 on.
function deletionIf(
  condition: string,
  owner: { receipt_id: string; client_id: string; chain_id: string; app_user_id: string },
  at: string,
  requestId: string,
  ...conditionParams: string[]
): Statement {
  return recordAudit(
    statement(
      `SELECT ?5, 'receipt.deleted', ?1, ?3, ?2, ?4, ?6 WHERE ${condition}`,
      owner.receipt_id,
      owner.client_id,
      owner.chain_id,
      owner.app_user_id,
      at,
      requestId,
      ...conditionParams,
    ),
  );
}

/**
 * A record per archived receipt of `receipts` (`receipt_id`, `chain_id`) erased at `at` by the
 * erasure `erasureId` of the app user now named `pseudonym`, but none for one with a tombstone
 * (deleted, not erased); once per receipt and erasure: a step run again after it committed adds
 * none.
 */
export function auditErasedArchived(
  receipts: readonly { receipt_id: string; chain_id: string }[],
  at: string,
  pseudonym: string,
  erasureId: string,
): Statement {
  return recordAudit(
    statement(
      `SELECT ?2, 'app_user.erased', json_extract(value, '$.receipt_id'), json_extract(value, '$.chain_id'), 'operator', ?3, ?4
      FROM json_each(?1) WHERE NOT ${tombstoned("json_extract(value, '$.receipt_id')")} AND NOT EXISTS (SELECT 1 FROM audit_log
        WHERE receipt_id = json_extract(value, '$.receipt_id') AND request_id = ?4)`,
      JSON.stringify(receipts.map(({ receipt_id, chain_id }) => ({ receipt_id, chain_id }))),
      at,
      pseudonym,
      erasureId,
    ),
  );
}

/**
 * A record per receipt that `receipts` selects (a query of one column, receipt_id, with its own
 * parameters), erased at `at` by the erasure `erasureId` of the app user now named `pseudonym`.
 */
export function auditErasedReceipts(receipts: Statement, at: string, pseudonym: string, erasureId: string): Statement {
  return recordAudit(
    enclose(
      receipts,
      (ids, atParam, pseudonymParam, erasureParam) =>
        `SELECT ${atParam}, 'app_user.erased', receipt_id, chain_id, 'operator', ${pseudonymParam}, ${erasureParam}
        FROM receipts WHERE receipt_id IN (${ids})`,
      at,
      pseudonym,
      erasureId,
    ),
  );
}

/**
 * An SQL expression, 1 once the erasure of the app user named by the parameter `pseudonymParam`
 * at the instant `atParam` has its own record: an erasure is its app user and its instant, so
 * that its last step, run again after it committed, records nothing twice.
 */
export function erasureRecorded(pseudonymParam: string, atParam: string): string {
  return `EXISTS (SELECT 1 FROM audit_log WHERE app_user = ${pseudonymParam} AND at = ${atParam}
    AND action = 'app_user.erased' AND receipt_id IS NULL)`;
}

/**
 * The erasure's own record, about no receipt, also when it erased nothing, with its event's
 * `eventId` as request_id; once per erasure, so that a step run again after it committed (with
 * a fresh event_id) adds no second one.
 */
export function auditErasure(at: string, pseudonym: string, eventId: string): Statement {
  return recordAudit(
    statement(
      `SELECT ?1, 'app_user.erased', NULL, NULL, 'operator', ?2, ?3 WHERE NOT ${erasureRecorded("?2", "?1")}`,
      at,
      pseudonym,
      eventId,
    ),
  );
}

/** The event_id of the erasure at `at` of the app user named `pseudonym`, from its own record. Row: `event_id`. */
export function erasureEventId(at: string, pseudonym: string): Statement {
  return statement(
    `SELECT request_id AS event_id FROM audit_log WHERE app_user = ?1 AND at = ?2
      AND action = 'app_user.erased' AND receipt_id IS NULL`,
    pseudonym,
    at,
  );
}

/**
 * The earlier erasures of the app user named `pseudonym`, at or before `at`, other than
 * `erasureId`: columns receipt_id, holding each one's event_id (an erasure's event is filed in the
 * outbox under its own ID), and `at`, null (it names no change to a receipt), for the outbox to
 * clear the events that still name the user.
 */
export function earlierErasuresOf(pseudonym: string, at: string, erasureId: string): Statement {
  return statement(
    `SELECT request_id AS receipt_id, NULL AS at FROM audit_log WHERE app_user = ?1 AND action = 'app_user.erased'
      AND receipt_id IS NULL AND at <= ?2 AND request_id <> ?3`,
    pseudonym,
    at,
    erasureId,
  );
}

/**
 * An SQL expression, 1 when `eventId` (an SQL expression) is the event_id of an erasure at
 * `occurredAt` (its event's occurred_at) whose app user was erased again since, and that later
 * erasure has its own record here: its event tells the app of the same user, and it took the
 * earlier one's events as it went. The earlier record is one probe of `audit_by_receipt` (no
 * receipt, its instant), the later ones of `audit_by_app_user`.
 */
export function erasedAgainSince(eventId: string, occurredAt: string): string {
  return `EXISTS (SELECT 1 FROM audit_log AS earlier JOIN audit_log AS later
      ON later.app_user = earlier.app_user AND later.action = 'app_user.erased' AND later.receipt_id IS NULL
        AND later.at >= earlier.at AND later.request_id <> earlier.request_id
    WHERE earlier.receipt_id IS NULL AND earlier.at = ${occurredAt} AND earlier.action = 'app_user.erased'
      AND earlier.request_id = ${eventId})`;
}

/** How many receipts the erasure `erasureId` of the app user named `pseudonym` erased here. Row: `n`. */
export function countErasedBy(pseudonym: string, erasureId: string): Statement {
  return statement(
    "SELECT COUNT(*) AS n FROM audit_log WHERE app_user = ?1 AND request_id = ?2 AND receipt_id IS NOT NULL",
    pseudonym,
    erasureId,
  );
}

/** How many of `receiptIds` the erasure `erasureId` of the app user named `pseudonym` erased here. Row: `n`. */
export function countErasedAmong(pseudonym: string, erasureId: string, receiptIds: readonly string[]): Statement {
  return statement(
    `SELECT COUNT(*) AS n FROM audit_log WHERE app_user = ?1 AND request_id = ?2
      AND receipt_id IN (SELECT value FROM json_each(?3))`,
    pseudonym,
    erasureId,
    JSON.stringify(receiptIds),
  );
}

/**
 * The receipts of the app user's records, under either of their names, created at or before
 * `createdBy` (ISO): columns receipt_id, `at` (when the record's change was made) and client_id
 * (the POS client that deleted it, its owner; `operator` for an erasure).
 */
export function receiptsAuditedFor(appUserId: string, pseudonym: string, createdBy: string): Statement {
  return statement(
    "SELECT receipt_id, at, client_id FROM audit_log WHERE app_user IN (?1, ?2) AND receipt_id IS NOT NULL AND receipt_id < ?3",
    appUserId,
    pseudonym,
    idsCreatedBy(createdBy),
  );
}

// A receipt_id is a UUIDv7 whose first 48 bits are its created_at in milliseconds, written as
// 8 hex digits, a hyphen and 4 more: every ID created at or before `instant` sorts below these
// 13 characters followed by "~", which sorts after every hex digit and the hyphen.
function idsCreatedBy(instant: string): string {
  const ms = Date.parse(instant).toString(16).padStart(12, "0");
  return `${ms.slice(0, 8)}-${ms.slice(8)}~`;
}

/** Up to `limit` of the app user's records get the pseudonym; returns a row per record changed. */
export function pseudonymiseAudit(appUserId: string, pseudonym: string, limit: number): Statement {
  return statement(
    `UPDATE audit_log SET app_user = ?2 WHERE audit_id IN (SELECT audit_id FROM audit_log
      WHERE app_user = ?1 LIMIT ?3) RETURNING 1`,
    appUserId,
    pseudonym,
    limit,
  );
}

/**
 * One page of a subject's records, newest first, at or after `since` (an ISO time as
 * Date#toISOString writes it) and below `after`. Rows carry audit_id for the next page's cursor.
 */
export function auditPage(
  subject: AuditSubject,
  id: string,
  { since, after, limit }: { since?: string; after?: AuditCursor; limit: number },
): Statement {
  const params: SqlValue[] = [id, limit];
  const conditions = [`${AUDIT_SUBJECTS[subject]} = ?1`];
  if (since !== undefined) {
    params.push(since);
    conditions.push(`at >= ?${params.length}`);
  }
  if (after) {
    params.push(after.at, after.audit_id);
    conditions.push(`(at < ?${params.length - 1} OR (at = ?${params.length - 1} AND audit_id < ?${params.length}))`);
  }
  return statement(
    `SELECT audit_id, at, action, receipt_id, chain_id, client_id, app_user, request_id FROM audit_log
    WHERE ${conditions.join(" AND ")} ORDER BY at DESC, audit_id DESC LIMIT ?2`,
    ...params,
  );
}

/** Up to `limit` records older than `cutoff`, oldest first through audit_by_at. */
export function purgeExpiredAudit(cutoff: Date, limit: number): Statement {
  return statement(
    `DELETE FROM audit_log WHERE audit_id IN
    (SELECT audit_id FROM audit_log WHERE at < ?1 ORDER BY at LIMIT ?2)`,
    cutoff.toISOString(),
    limit,
  );
}

/**
 * SQL that is true when the receipt `receiptId` (a placeholder or column) was removed by a delete
 * or an erasure: either leaves an audit record, the archive's move does not. One probe of
 * audit_by_receipt.
 */
export function auditedRemoval(receiptId: string): string {
  return `EXISTS (SELECT 1 FROM audit_log WHERE audit_log.receipt_id = ${receiptId})`;
}
