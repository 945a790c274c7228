/**
 * The erasure's statements on a shard's D1 tables (docs/storage.md#personal-data, "Erasure"), in
 * the order they run within a page: a table whose statements select receipts comes before
 * `receipts`, whose rows go last. The erasure (src/storage/erasure.ts,
 * src/storage/archive/erasure.ts) runs this list; the map of personal data
 * (src/storage/personal-data.ts) says, in words, what each column holds and how the erasure
 * reaches it, and test/storage/personal-data.node.test.ts fails when a table the map says the
 * erasure changes has no entry here.
 */
import { auditErasedReceipts, earlierErasuresOf, pseudonymiseAudit, receiptsAuditedFor } from "./audit.ts";
import { archiveUserPrefix, legacyUserPrefix, type ArchivedReceipt } from "./archive/layout.ts";
import { forgetOwners } from "./archive/owners.ts";
import { eraseTombstonesUnder } from "./archive/tombstones.ts";
import { eraseEventsOfReceipts, eraseLeftoverEventsOfReceipts } from "./outbox/statements.ts";
import { eraseExportCopies, eraseExportHolds } from "./export.ts";
import type { MappedTableName } from "./personal-data.ts";
import { enclose, statement, type Statement } from "./statement.ts";

/** What an erasure page on one shard works with (src/storage/erasure.ts). */
export interface ErasedUser {
  id: string;
  pseudonym: string;
  /** The erasure's ID, which its audit records keep as request_id. */
  event_id: string;
  /** The erasure's instant. */
  occurred_at: string;
}

/** The receipts of the app user a receipt page erases: a query of one column, receipt_id. */
export interface ReceiptPage {
  user: ErasedUser;
  receipts: Statement;
}

/** A page of what the app user's deleted receipts and earlier erasures left, up to `limit` rows a statement. */
export interface LeftoverPage {
  user: ErasedUser;
  limit: number;
}

/** Archived receipts the erasure's archive pass read on one shard, erased at `at`. */
export interface ArchivedPage {
  receipts: readonly Pick<ArchivedReceipt, "receipt_id" | "client_id">[];
  at: string;
}

/** The statements by which one D1 table takes part in each of an erasure's passes over a shard. */
export interface TableErasure {
  /** With a page of the app user's live receipts, before they go. */
  receiptPage?: (page: ReceiptPage) => Statement[];
  /** With what the app user's deleted receipts and earlier erasures left. Each returns a row per change. */
  leftoverPage?: (page: LeftoverPage) => Statement[];
  /** With the app user's archived receipts that the archive pass read. */
  archivedPage?: (page: ArchivedPage) => Statement[];
}

/** One table's part in the erasure: the map's name for it, and its statements in each pass. */
export interface ErasureStep extends TableErasure {
  table: MappedTableName;
}

/** Every table the erasure changes, in the order its statements run within a page. */
export const ERASURE_STEPS: readonly ErasureStep[] = [
  {
    table: "audit_log",
    receiptPage: ({ user, receipts }) => [auditErasedReceipts(receipts, user.occurred_at, user.pseudonym, user.event_id)],
    leftoverPage: ({ user, limit }) => [pseudonymiseAudit(user.id, user.pseudonym, limit)],
  },
  {
    table: "idempotency_keys",
    receiptPage: ({ user, receipts }) => [
      enclose(
        receipts,
        (ids, at) => `UPDATE idempotency_keys SET ${erasedKeyRecord(at!)}
        WHERE ${keyRecordsOf(ids, `SELECT client_id FROM receipts WHERE receipt_id IN (${ids})`)}`,
        user.occurred_at,
      ),
    ],
    leftoverPage: ({ user, limit }) => [
      enclose(
        receiptsAuditedFor(user.id, user.pseudonym, user.occurred_at),
        // A deleted receipt's audit record names the client that added it: only its owner may delete it.
        (audited, rows, at) => `UPDATE idempotency_keys SET ${erasedKeyRecord(at!)}
        WHERE (client_id, idempotency_key) IN (SELECT client_id, idempotency_key FROM idempotency_keys
          WHERE ${keyRecordsOf(`SELECT receipt_id FROM (${audited})`, `SELECT client_id FROM (${audited})`)} AND erased_at IS NULL
          LIMIT ${rows}) RETURNING 1`,
        limit,
        user.occurred_at,
      ),
    ],
    // An archived receipt's line names its client; its audit record, once erased, names the operator.
    archivedPage: ({ receipts, at }) => [
      enclose(
        statement("SELECT value ->> 'receipt_id' AS receipt_id, value ->> 'client_id' AS client_id FROM json_each(?1)", JSON.stringify(receipts)),
        (lines, erasedAt) => `UPDATE idempotency_keys SET ${erasedKeyRecord(erasedAt!)}
        WHERE ${keyRecordsOf(`SELECT receipt_id FROM (${lines})`, `SELECT client_id FROM (${lines})`)} AND erased_at IS NULL`,
        at,
      ),
    ],
  },
  { table: "notice_outbox", ...eventsErasure(0) },
  { table: "failed_notices", ...eventsErasure(1) },
  {
    table: "archive_tombstones",
    leftoverPage: ({ user, limit }) =>
      [archiveUserPrefix(user.pseudonym), legacyUserPrefix(user.id)].map((prefix) => eraseTombstonesUnder(prefix, limit, { purgedOnly: true })),
  },
  {
    table: "archived_owners",
    archivedPage: ({ receipts }) => [forgetOwners(receipts.map(({ receipt_id }) => receipt_id))],
  },
  {
    table: "export_requests",
    leftoverPage: ({ user }) => [statement("DELETE FROM export_requests WHERE app_user_id = ?1 RETURNING 1", user.id)],
  },
  {
    table: "export_copies",
    // Before export_holds' rows go: the copies are found through them.
    leftoverPage: ({ user }) => [eraseExportCopies(user.pseudonym)],
  },
  {
    table: "export_holds",
    leftoverPage: ({ user }) => [eraseExportHolds(user.pseudonym)],
  },
  {
    table: "receipts",
    receiptPage: ({ receipts }) => [enclose(receipts, (ids) => `DELETE FROM receipts WHERE receipt_id IN (${ids}) RETURNING receipt_id`)],
  },
];

/** The statements of one pass of the erasure over a shard, table by table in the list's order. */
export function erasureStatements<P extends keyof TableErasure>(pass: P, page: Parameters<NonNullable<TableErasure[P]>>[0]): Statement[] {
  return ERASURE_STEPS.flatMap((step) => {
    const build = step[pass] as ((page: Parameters<NonNullable<TableErasure[P]>>[0]) => Statement[]) | undefined;
    return build ? build(page) : [];
  });
}

/**
 * The archive pass's statements for the archived receipts it read on one shard: the copies D1 still
 * holds of them (their Idempotency-Key answers, their events, their owner rows).
 */
export function eraseCopiesOfArchived(receipts: ArchivedPage["receipts"], at: string): Statement[] {
  return erasureStatements("archivedPage", { receipts: receipts.map(({ receipt_id, client_id }) => ({ receipt_id, client_id })), at });
}

// The erasure of the events of the app user's receipts, in the outbox (0) or the failed events (1):
// the outbox's statements come in pairs, one a table. Leftovers are the events of the receipts
// the user's audit records name (their deleted ones) and of their earlier erasures, delivered or
// dead-lettered: one still to deliver goes out, so that the app is told of every erasure.
function eventsErasure(table: 0 | 1): TableErasure {
  return {
    receiptPage: ({ receipts }) => [eraseEventsOfReceipts(receipts)[table]],
    leftoverPage: ({ user, limit }) => [
      eraseLeftoverEventsOfReceipts(receiptsAuditedFor(user.id, user.pseudonym, user.occurred_at), limit)[table],
      earlierErasuresEvents(user, limit)[table],
    ],
    archivedPage: ({ receipts }) => [eraseEventsOfReceipts(archivedIds(receipts))[table]],
  };
}

/**
 * A page of up to `limit` events of the app user's earlier erasures, in the outbox (0, delivered
 * ones only) and the failed events (1). The erasure's last step runs both again: an event still to
 * deliver when the pages swept its shard may have been delivered or dead-lettered since, and once
 * the erasure's own record stands the notifier keeps neither (outbox/statements.ts
 * `forgetErasedAgain`, `moveToFailed`).
 */
export function earlierErasuresEvents(user: ErasedUser, limit: number): [Statement, Statement] {
  return eraseLeftoverEventsOfReceipts(earlierErasuresOf(user.pseudonym, user.occurred_at, user.event_id), limit, true);
}

function archivedIds(receipts: ArchivedPage["receipts"]): Statement {
  return statement("SELECT value ->> 'receipt_id' FROM json_each(?1)", JSON.stringify(receipts));
}

// The Idempotency-Key records of the receipts `ids` selects, whose clients `clients` selects:
// the table has no index by receipt (migration 0012), so they are found under their client,
// the first column of its primary key, among that client's last day of keys.
function keyRecordsOf(ids: string, clients: string): string {
  return `client_id IN (${clients}) AND receipt_id IN (${ids})`;
}

// An Idempotency-Key record in erased form (migration 0006): no app_user_id in its answer;
// `at` is the placeholder of the erasure's instant.
function erasedKeyRecord(at: string): string {
  return `response = json_remove(response, '$.data.app_user_id'), erased_at = ${at}`;
}
