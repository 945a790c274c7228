/**
 * The outbox: a notice's life from the change that recorded it to its push, and the failed
 * notices it moves to when pushing keeps failing. Used by both Workers; the SQL itself is in
 * outbox-sql.ts, shared with the operator script.
 */
import { FAILED_SQL, OUTBOX_SQL } from "./outbox-sql.ts";

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
  /** `body`: the receipt's stored body, which a created event's push carries; null once deleted. */
  | { status: "claimed"; payload: string; attempts: number; body: string | null }
  | { status: "delivered" }
  | { status: "held"; until: Date }
  | { status: "gone" };

/**
 * Claims notices until `now + leaseMs`, so that two deliveries of one event_id never push at
 * the same time and a delivered one is never pushed again. One D1 round trip of two statements
 * for any number of notices of one shard; the claims come back in the order of `eventIds`.
 */
export async function claimNotices(
  db: D1Database,
  eventIds: readonly string[],
  now: Date,
  leaseMs: number,
): Promise<Claim[]> {
  const ids = JSON.stringify([...new Set(eventIds)]);
  const until = new Date(now.getTime() + leaseMs).toISOString();
  const [claimed, states] = await db.batch([
    db.prepare(OUTBOX_SQL.claim).bind(ids, until, now.toISOString()),
    db.prepare(OUTBOX_SQL.state).bind(ids),
  ]);
  const claims = new Map((claimed!.results as ClaimedRow[]).map((row) => [row.event_id, row]));
  const rows = new Map((states!.results as StateRow[]).map((row) => [row.event_id, row]));
  return eventIds.map((eventId) => {
    const row = claims.get(eventId);
    // A second copy of one event in the batch finds it held by the first.
    claims.delete(eventId);
    if (row) return { status: "claimed", payload: row.payload, attempts: row.attempts, body: row.body };
    return claimState(rows.get(eventId), now);
  });
}

interface ClaimedRow {
  event_id: string;
  payload: string;
  attempts: number;
  body: string | null;
}

interface StateRow {
  event_id: string;
  delivered_at: string | null;
  claimed_until: string | null;
  created_claimed_until: string | null;
}

function claimState(row: StateRow | undefined, now: Date): Claim {
  if (!row) return { status: "gone" };
  if (row.delivered_at !== null) return { status: "delivered" };
  if (row.claimed_until !== null && row.claimed_until > now.toISOString()) {
    return { status: "held", until: new Date(row.claimed_until) };
  }
  // Held by its receipt's created event, whose push usually ends long before its claim does:
  // look again soon. (Or a claim that ended between the two statements: at once.)
  const soon = new Date(now.getTime() + HELD_BY_CREATED_RECHECK_MS);
  const createdUntil = row.created_claimed_until === null ? now : new Date(row.created_claimed_until);
  return { status: "held", until: createdUntil < soon ? createdUntil : soon };
}

const HELD_BY_CREATED_RECHECK_MS = 3_000;

/**
 * Records what became of claimed notices, in one D1 round trip: `delivered` ones are done, and
 * each of `failed` keeps its error with its claim freed for the next attempt.
 */
export async function settleNotices(
  db: D1Database,
  outcome: { delivered: readonly string[]; failed: readonly { eventId: string; error: string }[] },
  now: Date,
): Promise<void> {
  const statements = [
    ...(outcome.delivered.length > 0
      ? [db.prepare(OUTBOX_SQL.markDelivered).bind(JSON.stringify(outcome.delivered), now.toISOString())]
      : []),
    ...outcome.failed.map(({ eventId, error }) => db.prepare(OUTBOX_SQL.recordFailure).bind(eventId, error)),
  ];
  if (statements.length > 0) await db.batch(statements);
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
