/**
 * The SQL of the outbox and the failed notices (migration 0003) as plain text. The Workers bind it
 * in outbox.ts; the operator script (`npm run notices`), which runs on Node and cannot use the
 * Workers runtime's types, runs the same text through `wrangler d1 execute`. So this file must
 * stay free of Workers types.
 */
import { UUID_V7_PATTERN } from "../shared/shard-ids.ts";

/**
 * An event_id as the API Worker makes them (UUIDv7, lower-case). The operator script inlines
 * event ids into SQL, because `wrangler d1 execute` takes no bind parameters; only text that
 * matches this pattern, which holds no quote or other SQL syntax, is ever inlined.
 */
export const EVENT_ID_PATTERN = UUID_V7_PATTERN;

/** SQL of the outbox's life between the delete and the push. */
export const OUTBOX_SQL = {
  /** Marks notices sent to the queue; ?2 is a JSON array of event ids. */
  markEnqueued: "UPDATE notice_outbox SET enqueued_at = ?1 WHERE event_id IN (SELECT value FROM json_each(?2))",
  /**
   * Notices the cron job sends (again): never enqueued and older than the grace period (?1), or
   * enqueued before ?2 and still not delivered, whose queue copy must have been lost.
   */
  pending: `SELECT event_id, payload FROM notice_outbox
    WHERE delivered_at IS NULL AND ((enqueued_at IS NULL AND created_at <= ?1) OR enqueued_at <= ?2)
    ORDER BY created_at LIMIT ?3`,
  /**
   * Takes the notices (?1, a JSON array of event ids) for one push attempt until ?2, unless it is delivered, another delivery
   * holds an unexpired claim (at ?3), or its receipt's created event is being pushed right now
   * (a deleted event waits for it: the app never hears of a receipt after its deletion); returns
   * nothing then. Returns the receipt's stored body too, which a created event's push carries
   * (NULL once the receipt is deleted).
   */
  claim: `UPDATE notice_outbox SET claimed_until = ?2, attempts = attempts + 1
    WHERE event_id IN (SELECT value FROM json_each(?1))
      AND delivered_at IS NULL AND (claimed_until IS NULL OR claimed_until <= ?3)
      AND NOT EXISTS (SELECT 1 FROM notice_outbox AS created
        WHERE created.receipt_id = notice_outbox.receipt_id AND created.event_id <> notice_outbox.event_id
          AND created.delivered_at IS NULL AND created.claimed_until > ?3
          AND json_extract(created.payload, '$.type') = 'receipt.created')
    RETURNING event_id, payload, attempts,
      (SELECT body FROM receipts WHERE receipts.receipt_id = notice_outbox.receipt_id) AS body`,
  /**
   * Why a claim failed: delivered, held by another delivery of it, held by its receipt's created
   * event in flight, or no row at all.
   */
  state: `SELECT event_id, delivered_at, claimed_until, (SELECT MAX(created.claimed_until) FROM notice_outbox AS created
      WHERE created.receipt_id = notice_outbox.receipt_id AND created.event_id <> notice_outbox.event_id
        AND created.delivered_at IS NULL AND json_extract(created.payload, '$.type') = 'receipt.created') AS created_claimed_until
    FROM notice_outbox WHERE event_id IN (SELECT value FROM json_each(?1))`,
  /** Marks notices delivered; ?1 is a JSON array of event ids. */
  markDelivered: `UPDATE notice_outbox SET delivered_at = ?2, claimed_until = NULL
    WHERE event_id IN (SELECT value FROM json_each(?1))`,
  /** Records a failed attempt and frees the claim, so the next copy can try at once. */
  recordFailure: "UPDATE notice_outbox SET last_error = ?2, claimed_until = NULL WHERE event_id = ?1",
  /** Delivered rows older than ?1, a page at a time so that one statement stays small. */
  purgeDelivered: `DELETE FROM notice_outbox WHERE event_id IN
    (SELECT event_id FROM notice_outbox WHERE delivered_at <= ?1 LIMIT ?2)`,
} as const;

/** SQL of the dead letters. */
export const FAILED_SQL = {
  /**
   * Moves an undelivered notice from the outbox to failed_notices (?2 = failed_at). A delivered
   * one stays where it is: another copy got through. ?3 stands in for a missing last error.
   */
  store: `INSERT INTO failed_notices (event_id, receipt_id, payload, created_at, failed_at, attempts, last_error)
    SELECT event_id, receipt_id, payload, created_at, ?2, attempts, COALESCE(last_error, ?3)
    FROM notice_outbox WHERE event_id = ?1 AND delivered_at IS NULL
    ON CONFLICT (event_id) DO NOTHING`,
  removeFromOutbox: "DELETE FROM notice_outbox WHERE event_id = ?1 AND delivered_at IS NULL",
  /** Every failed notice, oldest failure first. */
  list: "SELECT event_id, receipt_id, failed_at, attempts, last_error FROM failed_notices ORDER BY failed_at, event_id",
} as const;

/**
 * One statement batch that moves failed notices back into the outbox as neither enqueued nor
 * delivered, with fresh attempts, and removes them from failed_notices; the cron job then sends
 * them within a minute. `eventIds` empty means every failed notice. The last statement returns
 * the replayed event ids.
 *
 * @throws RangeError for an id that does not match {@link EVENT_ID_PATTERN}.
 * @example replayFailedSql(["0193a1b2-..."]) // for `wrangler d1 execute --command`
 */
export function replayFailedSql(eventIds: readonly string[]): string {
  for (const id of eventIds) {
    if (!EVENT_ID_PATTERN.test(id)) throw new RangeError(`not an event_id: ${JSON.stringify(id)}`);
  }
  // Safe to inline: every id matched EVENT_ID_PATTERN above. "WHERE 1" keeps SQLite from reading
  // ON CONFLICT as part of the SELECT when no ids narrow it.
  const filter = eventIds.length === 0 ? "1" : `event_id IN (${eventIds.map((id) => `'${id}'`).join(", ")})`;
  return `INSERT INTO notice_outbox (event_id, receipt_id, payload, created_at, attempts, last_error)
  SELECT event_id, receipt_id, payload, created_at, 0, last_error FROM failed_notices WHERE ${filter}
  ON CONFLICT (event_id) DO UPDATE SET enqueued_at = NULL, delivered_at = NULL, claimed_until = NULL, attempts = 0;
DELETE FROM failed_notices WHERE ${filter} RETURNING event_id, receipt_id;`;
}
