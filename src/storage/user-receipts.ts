/**
 * The one query by which an app user's erasure and export find the user's receipts on a shard
 * (src/storage/erasure.ts, src/storage/export.ts). This file stays free of Workers types.
 */

// The chains a shard holds, one index probe each (a loose index scan on receipts_by_app_user,
// whose first column is chain_id): the app user's receipts are then found chain by chain through
// that same index, so neither the erasure nor the export needs an index of its own on receipts,
// which every add would pay for.
const CHAINS = `chains(chain_id) AS (
      SELECT MIN(chain_id) FROM receipts
      UNION ALL
      SELECT (SELECT MIN(chain_id) FROM receipts WHERE chain_id > chains.chain_id) FROM chains WHERE chain_id IS NOT NULL)`;

/**
 * A page of the app user's receipts (`?1`) created at or before the instant (`?2`), in
 * receipt_id order: `columns` of each, past the receipt_id in `afterParam` when given, at most
 * the number in `limitParam`.
 */
export function userReceiptsPage(columns: string, limitParam: string, afterParam?: string): string {
  return `WITH RECURSIVE ${CHAINS}
    SELECT ${columns} FROM receipts
      WHERE chain_id IN (SELECT chain_id FROM chains) AND app_user_id = ?1 AND created_at <= ?2${afterParam ? ` AND receipt_id > ${afterParam}` : ""}
      ORDER BY receipt_id LIMIT ${limitParam}`;
}
