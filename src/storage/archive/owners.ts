/**
 * Every statement on `archived_owners` (migration 0010, docs/storage.md#archived-owners): the
 * shard's index of who owns each receipt it archived, the client_id, chain_id and app_user_id that
 * delete compares with its headers. The R2 layout names an object by app user and chain, so only
 * this index tells a wrong app_user_id or chain_id from an unknown ID without reading R2. A row
 * lives from the move's removal of the receipt to its delete or its app user's erasure. This file
 * stays free of Workers types: the erasure runs on Node too.
 */
import { fenced } from "../fences.ts";
import type { OwnerParams } from "../ownership.ts";
import { enclose, statement, type Statement } from "../statement.ts";

/** An archived receipt's ID and the fields delete compares with its headers. */
export interface ArchivedOwner {
  receipt_id: string;
  client_id: string;
  chain_id: string;
  app_user_id: string;
}

/**
 * The owners of the receipts that `receiptIds` selects (a query of one column), copied from their
 * rows: in the move's removal batch right before the statement that deletes those rows, with the
 * same selection, so that a receipt leaves D1 exactly when its owner row arrives. Run again, it
 * changes nothing.
 *
 * @example recordOwners(statement("SELECT value FROM json_each(?1)", JSON.stringify(ids)))
 */
export function recordOwners(receiptIds: Statement): Statement {
  return enclose(
    receiptIds,
    (ids) => `INSERT INTO archived_owners (receipt_id, client_id, chain_id, app_user_id)
    SELECT receipt_id, client_id, chain_id, app_user_id FROM receipts WHERE receipt_id IN (${ids})
    ON CONFLICT (receipt_id) DO NOTHING`,
  );
}

/**
 * SQL joining the archived owner of the receipt whose ID is `receiptIdParam` as `alias` (its
 * columns NULL when the shard archived no such receipt): delete's first statement reads it beside
 * the live row, so that the live path keeps its one batch.
 */
export function archivedOwnerJoin(alias: string, receiptIdParam: string): string {
  return `LEFT JOIN archived_owners AS ${alias} ON ${alias}.receipt_id = ${receiptIdParam}`;
}

/**
 * An archived receipt's owner as a delete checks it: with the pseudonym of its app user and the
 * receipt's created_at, which say whether an erasure's fence covers it.
 */
export interface FencedOwner extends ArchivedOwner {
  user_key: string;
  created_at: string;
}

/** The placeholders of an archived delete's condition ({@link archivedOwned}), in its statement. */
export interface ArchivedOwnerParams extends OwnerParams {
  /** The receipt's created_at, from its archived line: the row holds none. */
  createdAt: string;
}

/**
 * An SQL expression, 1 while the archived receipt has its owner row with the client_id, chain_id
 * and app_user_id of the placeholders and no erasure's fence of that app user stands at or after
 * its created_at, else 0: the condition of an archived delete's writes, as the live row's is of a
 * live one's, so that of two racing deletes, or a delete and an erasure that removed the row or is
 * on its way to it, only the first writes.
 */
export function archivedOwned(p: ArchivedOwnerParams): string {
  return `(EXISTS (SELECT 1 FROM archived_owners WHERE receipt_id = ${p.receiptId} AND client_id = ${p.clientId}
    AND chain_id = ${p.chainId} AND app_user_id = ${p.appUserId}) AND NOT ${fenced(p.userKey, p.createdAt)})`;
}

/**
 * The owner row of an archived receipt goes once it has a tombstone, which then answers for it: in
 * an archived delete's batch after the tombstone's insert, so that a delete that wrote nothing (an
 * erasure's fence covers the receipt) leaves the row to the erasure.
 */
export function forgetTombstonedOwner(receiptId: string): Statement {
  return statement(
    "DELETE FROM archived_owners WHERE receipt_id = ?1 AND EXISTS (SELECT 1 FROM archive_tombstones WHERE receipt_id = ?1)",
    receiptId,
  );
}

/** The owner rows of these receipts go: in an erasure's archive page with the audit records of the lines it read. */
export function forgetOwners(receiptIds: readonly string[]): Statement {
  return statement("DELETE FROM archived_owners WHERE receipt_id IN (SELECT value FROM json_each(?1))", JSON.stringify(receiptIds));
}
