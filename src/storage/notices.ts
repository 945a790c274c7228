/**
 * D1 access for deletion notices: the delete operation's atomic step, the outbox that carries a
 * notice until it is delivered, and the failed notices. Used by both Workers; the SQL itself is
 * in notice-sql.ts, shared with the operator script.
 */
import type { DeletionNotice } from "../shared/types.ts";
import { DELETE_SQL, FAILED_SQL, OUTBOX_SQL } from "./notice-sql.ts";

/** The fields of a receipt that delete compares with the request's headers (seed §2). */
export interface ReceiptOwner {
  client_id: string;
  chain_id: string;
  app_user_id: string;
}

/** What the delete operation's batch did: deleted, or why not (the receipt as it was, or none). */
export type DeleteOutcome = { deleted: true } | { deleted: false; receipt: ReceiptOwner | null };

/**
 * Deletes the notice's receipt and records the notice in the outbox, in one D1 batch (one round
 * trip, one transaction), only if the receipt exists with the notice's client_id, chain_id and
 * app_user_id. Both writes carry that condition, so of two racing deletes exactly one removes the
 * receipt and records a notice; the other sees no receipt.
 */
export async function deleteReceiptWithNotice(db: D1Database, notice: DeletionNotice): Promise<DeleteOutcome> {
  const { event_id, occurred_at, receipt_id, client_id, chain_id, app_user_id } = notice;
  const [before, , removal] = await db.batch([
    db.prepare(DELETE_SQL.readOwner).bind(receipt_id),
    db
      .prepare(DELETE_SQL.insertNotice)
      .bind(event_id, JSON.stringify(notice), occurred_at, receipt_id, client_id, chain_id, app_user_id),
    db.prepare(DELETE_SQL.deleteReceipt).bind(receipt_id, client_id, chain_id, app_user_id),
  ]);
  if (removal!.meta.changes === 1) return { deleted: true };
  return { deleted: false, receipt: (before!.results[0] as ReceiptOwner | undefined) ?? null };
}

/** Records that these notices were handed to the queue at `now`. */
export async function markEnqueued(db: D1Database, eventIds: readonly string[], now: Date): Promise<void> {
  await db.prepare(OUTBOX_SQL.markEnqueued).bind(now.toISOString(), JSON.stringify(eventIds)).run();
}

/** A notice as the outbox stores it: its id and the queue message as JSON. */
export interface OutboxNotice {
  event_id: string;
  payload: string;
}

/**
 * Notices to send (again): never enqueued though created before `unsentBefore`, or enqueued
 * before `lostBefore` and still undelivered. Oldest first, at most `limit`.
 */
export async function pendingNotices(
  db: D1Database,
  { unsentBefore, lostBefore, limit }: { unsentBefore: Date; lostBefore: Date; limit: number },
): Promise<OutboxNotice[]> {
  const { results } = await db
    .prepare(OUTBOX_SQL.pending)
    .bind(unsentBefore.toISOString(), lostBefore.toISOString(), limit)
    .all<OutboxNotice>();
  return results;
}

/**
 * The outcome of claiming a notice for one push attempt: `claimed` with the payload to push, or
 * why not: already `delivered`, `held` by another delivery until a time, or `gone` (no outbox
 * row: purged long after delivery, or moved to the failed notices).
 */
export type Claim =
  | { status: "claimed"; payload: string; attempts: number }
  | { status: "delivered" }
  | { status: "held"; until: Date }
  | { status: "gone" };

/**
 * Claims a notice until `now + leaseMs`, so that two deliveries of one event_id never push at
 * the same time and a delivered one is never pushed again. One D1 round trip.
 */
export async function claimNotice(db: D1Database, eventId: string, now: Date, leaseMs: number): Promise<Claim> {
  const [claim, state] = await db.batch([
    db.prepare(OUTBOX_SQL.claim).bind(eventId, new Date(now.getTime() + leaseMs).toISOString(), now.toISOString()),
    db.prepare(OUTBOX_SQL.state).bind(eventId),
  ]);
  const claimed = claim!.results[0] as { payload: string; attempts: number } | undefined;
  if (claimed) return { status: "claimed", payload: claimed.payload, attempts: claimed.attempts };
  const row = state!.results[0] as { delivered_at: string | null; claimed_until: string | null } | undefined;
  if (!row) return { status: "gone" };
  if (row.delivered_at !== null) return { status: "delivered" };
  return { status: "held", until: new Date(row.claimed_until!) };
}

/** Records the delivery of a notice and frees its claim. */
export async function markDelivered(db: D1Database, eventId: string, now: Date): Promise<void> {
  await db.prepare(OUTBOX_SQL.markDelivered).bind(eventId, now.toISOString()).run();
}

/** Records why a push attempt failed and frees the claim for the next attempt. */
export async function recordFailure(db: D1Database, eventId: string, error: string): Promise<void> {
  await db.prepare(OUTBOX_SQL.recordFailure).bind(eventId, error).run();
}

/** Stands in for the last error of a notice that was dead-lettered before any attempt failed. */
const NO_ERROR_RECORDED = "dead-lettered with no failed attempt recorded";

/**
 * Moves an undelivered notice from the outbox to the failed notices, keeping its last error.
 * Returns false when there was nothing to move: delivered after all, or moved already.
 */
export async function storeFailedNotice(db: D1Database, eventId: string, now: Date): Promise<boolean> {
  const [stored] = await db.batch([
    db.prepare(FAILED_SQL.store).bind(eventId, now.toISOString(), NO_ERROR_RECORDED),
    db.prepare(FAILED_SQL.removeFromOutbox).bind(eventId),
  ]);
  return stored!.meta.changes === 1;
}

/** Deletes up to `limit` outbox rows delivered before `before`; returns how many. */
export async function purgeDeliveredNotices(db: D1Database, before: Date, limit: number): Promise<number> {
  const result = await db.prepare(OUTBOX_SQL.purgeDelivered).bind(before.toISOString(), limit).run();
  return result.meta.changes;
}
