/**
 * The SQL of the audit trail (migration 0005, docs/api.md#audit) as plain text: the API Worker's
 * cron job binds the purge (audit.ts), the operator script (`npm run audit`) runs the queries
 * through `wrangler d1 execute`. So this file stays free of Workers types.
 */
import { sqlText } from "./sql-text.ts";

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
  /** The delete's request reference, or the erasure's event_id. */
  request_id: string;
}

/** What `npm run audit` looks records up by, and the column that holds it. */
export const AUDIT_SUBJECTS = { receipt: "receipt_id", client: "client_id", chain: "chain_id" } as const;
export type AuditSubject = keyof typeof AUDIT_SUBJECTS;

/** Where a page of records newest first ended: the next page starts below it. */
export interface AuditCursor {
  at: string;
  audit_id: number;
}

/**
 * One page of a subject's records, newest first, at or after `since` (an ISO time as
 * Date#toISOString writes it) and below `after`. Rows carry audit_id for the next page's cursor.
 * Every value goes in as a {@link sqlText} literal, so no ID can alter the query.
 */
export function auditPageSql(
  subject: AuditSubject,
  id: string,
  { since, after, limit }: { since?: string; after?: AuditCursor; limit: number },
): string {
  const conditions = [`${AUDIT_SUBJECTS[subject]} = ${sqlText(id)}`];
  if (since !== undefined) conditions.push(`at >= ${sqlText(since)}`);
  if (after) {
    conditions.push(`(at < ${sqlText(after.at)} OR (at = ${sqlText(after.at)} AND audit_id < ${Math.trunc(after.audit_id)}))`);
  }
  return `SELECT audit_id, at, action, receipt_id, chain_id, client_id, app_user, request_id FROM audit_log
    WHERE ${conditions.join(" AND ")} ORDER BY at DESC, audit_id DESC LIMIT ${Math.trunc(limit)}`;
}

/** Records older than ?1, a page of ?2 at a time, oldest first through audit_by_at. */
export const PURGE_EXPIRED_AUDIT = `DELETE FROM audit_log WHERE audit_id IN
  (SELECT audit_id FROM audit_log WHERE at < ?1 ORDER BY at LIMIT ?2)`;
