/** The audit trail's upkeep in the API Worker (docs/api.md#audit); its SQL is in audit-sql.ts. */
import { PURGE_EXPIRED_AUDIT } from "./audit-sql.ts";
import { deleteInRounds } from "./rounds.ts";

/** Deletes the audit records older than `cutoff`, in bounded rounds; returns how many. */
export async function purgeExpiredAudit(db: D1Database, cutoff: Date): Promise<number> {
  return deleteInRounds(db, PURGE_EXPIRED_AUDIT, cutoff.toISOString());
}
