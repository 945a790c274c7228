/**
 * The outbox's operations in the Workers: each runs statements of statements.ts on one shard's
 * D1 database, and says what became of the events in the terms of their life ({@link EventState}).
 */
import { bound, runBatch } from "../statement.ts";
import { receiptAsPushed, type StoredColumns } from "../stored-body.ts";
import { pushedEvent } from "./pushed-event.ts";
import {
  claimEventsStatement,
  claimStates,
  endpointStateStatement,
  feedPage,
  forgetErasedAgain,
  markDelivered,
  markEndpointDownStatement,
  markEndpointUpStatement,
  markEndpointUpIfDown,
  probeCandidatesStatement,
  takeProbeStatements,
  markEnqueuedStatement,
  moveToFailed,
  pendingEventsStatement,
  purgeDeliveredStatement,
  recordFailedAttempt,
  stateOfRow,
  undeliveredEvent,
  type EventState,
  type OutboxRowState,
} from "./statements.ts";

/** Records that the cron job handed these events to the queue again at `now`. */
export async function markEnqueued(db: D1Database, eventIds: readonly string[], now: Date): Promise<void> {
  await bound(db, markEnqueuedStatement(eventIds, now)).run();
}

/** An event as the outbox stores it: its id and the queue message as JSON. */
export interface OutboxEvent {
  event_id: string;
  payload: string;
}

/**
 * Events to send (again), none claimed at `now`: never claimed nor re-sent though recorded before
 * `unsentBefore`; due for their next attempt; waiting since before the push service came back at
 * `upSince`; or, with no attempt scheduled, last claimed or re-sent before `lostBefore` and still
 * undelivered. Oldest first, at most `limit`.
 */
export async function pendingEvents(
  db: D1Database,
  { limit, ...since }: { unsentBefore: Date; lostBefore: Date; upSince: Date | null; limit: number },
  now: Date,
): Promise<OutboxEvent[]> {
  const { results } = await bound(db, pendingEventsStatement(since, now, limit)).all<OutboxEvent>();
  return results;
}

/** While the push service is down: the oldest `limit` events due by `now`, to probe it with. */
export async function probeCandidates(db: D1Database, now: Date, limit: number): Promise<OutboxEvent[]> {
  const { results } = await bound(db, probeCandidatesStatement(now, limit)).all<OutboxEvent>();
  return results;
}

/**
 * The outcome of claiming an event for one push attempt: `claimed` with the payload to push, or
 * why not: already `delivered`, `held` by another delivery until a time, or `gone` (no outbox
 * row: purged long after delivery, or moved to the failed events).
 */
export type Claim =
  /**
   * `body`: the receipt's stored body, which a created event's push carries; null once deleted.
   * `retryUntil`: the end of its retry window, null before any attempt failed.
   * `pausedMs`: how long the push service was down as a whole since its window opened, which the
   * window does not count (0 before it opened).
   * `lateMs`: the notifier's own lateness since its window opened, this attempt's included (from
   * its due time to now, the down time since not counted twice), which the window does not count
   * either (0 before it opened).
   * `endpointDown`: the shard's copy of the push service's state says down.
   */
  | {
      status: "claimed";
      payload: string;
      attempts: number;
      retryUntil: Date | null;
      pausedMs: number;
      lateMs: number;
      body: string | null;
      endpointDown: boolean;
    }
  | { status: "delivered" }
  | { status: "held"; until: Date }
  | { status: "gone" };

/**
 * Claims events until `now + leaseMs`, so that two deliveries of one event_id never push at
 * the same time and a delivered one is never pushed again. For any number of events of one
 * shard: one statement when every event is claimed (the usual case), and a second round trip
 * of one statement to tell why, only when some were not. The claims come back in the order of
 * `eventIds`.
 */
export async function claimEvents(
  db: D1Database,
  eventIds: readonly string[],
  now: Date,
  leaseMs: number,
): Promise<Claim[]> {
  const ids = [...new Set(eventIds)];
  const until = new Date(now.getTime() + leaseMs);
  const { results: claimed } = await bound(db, claimEventsStatement(ids, until, now)).all<ClaimedRow>();
  const claims = new Map(claimed.map((row) => [row.event_id, row]));
  const claimedIds = new Set(claims.keys());
  const unclaimedIds = ids.filter((id) => !claimedIds.has(id));
  const { results: states } =
    unclaimedIds.length === 0 ? { results: [] } : await bound(db, claimStates(unclaimedIds)).all<StateRow>();
  const rows = new Map(states.map((row) => [row.event_id, row]));
  const bodies = new Map(await Promise.all(claimed.map(async (row) => [row.event_id, await pushedBody(row)] as const)));
  return eventIds.map((eventId) => {
    const row = claims.get(eventId);
    if (row) {
      // A second copy of one event in the batch finds it held by the first.
      claims.delete(eventId);
      const retryUntil = row.retry_until === null ? null : new Date(row.retry_until);
      const body = bodies.get(eventId)!;
      const pausedMs = Math.max(0, row.paused_ms ?? 0);
      const lateMs = Math.max(0, row.late_ms ?? 0);
      return { status: "claimed", payload: row.payload, attempts: row.attempts, retryUntil, pausedMs, lateMs, body, endpointDown: row.endpoint_down === 1 };
    }
    return claimedIds.has(eventId) ? { status: "held", until } : unclaimed(rows.get(eventId), now);
  });
}

type ClaimedRow = ReceiptColumns & {
  event_id: string;
  payload: string;
  attempts: number;
  retry_until: string | null;
  paused_ms: number | null;
  late_ms: number | null;
  endpoint_down: number;
};

/** A receipt's stored columns as a claim or the feed reads them: all null where it is not stored. */
type ReceiptColumns = StoredColumns | { [Column in keyof StoredColumns]: null };

// The receipt as its created event carries it, or null where it is not stored.
function pushedBody(row: ReceiptColumns): Promise<string | null> | null {
  return row.body === null ? null : receiptAsPushed(row as StoredColumns);
}

interface StateRow extends OutboxRowState {
  event_id: string;
  created_claimed_until: string | null;
}

const UNCLAIMED: Record<EventState, (row: StateRow, now: Date) => Claim> = {
  delivered: () => ({ status: "delivered" }),
  claimed: (row) => ({ status: "held", until: new Date(row.claimed_until!) }),
  // Held by its receipt's created event, whose push usually ends long before its claim does:
  // look again soon. (Or a claim that ended between the two statements: at once.)
  recorded: heldByCreatedEvent,
  enqueued: heldByCreatedEvent,
  failed: () => ({ status: "gone" }),
  purged: () => ({ status: "gone" }),
};

function unclaimed(row: StateRow | undefined, now: Date): Claim {
  return row ? UNCLAIMED[stateOfRow(row, now)](row, now) : { status: "gone" };
}

function heldByCreatedEvent(row: StateRow, now: Date): Claim {
  const soon = new Date(now.getTime() + HELD_BY_CREATED_RECHECK_MS);
  const createdUntil = row.created_claimed_until === null ? now : new Date(row.created_claimed_until);
  return { status: "held", until: createdUntil < soon ? createdUntil : soon };
}

const HELD_BY_CREATED_RECHECK_MS = 3_000;

/**
 * A failed attempt as recorded: its error, and its next attempt (null: dead-lettered next), with
 * its window as opened and the notifier's lateness so far, as the claim measured it.
 */
export interface FailedAttempt {
  eventId: string;
  error: string;
  schedule: { nextAttemptAt: Date; retryUntil: Date; lateMs: number } | null;
}

/**
 * Records what became of claimed events, in one D1 round trip: `delivered` ones are done, and
 * each of `failed` keeps its error and its next attempt, with its claim freed. `erasures` names
 * the erasures' events among the delivered ones: one whose app user was erased again since
 * leaves the outbox ({@link forgetErasedAgain}), in a statement that a batch of receipts' events
 * goes without. `upAt`, when a
 * push got through at that time while the shard's copy said the push service was down: the copy
 * says up again (see {@link markEndpointUp}).
 */
export async function settleEvents(
  db: D1Database,
  outcome: { delivered: readonly string[]; erasures?: readonly string[]; failed: readonly FailedAttempt[]; upAt?: Date },
  now: Date,
): Promise<void> {
  const statements = [
    ...(outcome.delivered.length > 0 ? [markDelivered(outcome.delivered, now)] : []),
    ...(outcome.erasures?.length ? [forgetErasedAgain(outcome.erasures)] : []),
    ...outcome.failed.map(({ eventId, error, schedule }) => recordFailedAttempt(eventId, error, schedule, now)),
    ...(outcome.upAt ? [markEndpointUpIfDown(outcome.upAt)] : []),
  ];
  if (statements.length > 0) await runBatch(db, statements);
}

/**
 * What the dead-letter queue's consumer makes of an event at `now`: `failed`, moved from the
 * outbox to the failed events with its last error, when its retrying is over (a refusal, its
 * retry window of `windowMs` ended, the push service's down time and the notifier's lateness not
 * counted, or no push failed in as long since it was made); else
 * `scheduled`, left in the outbox, where its schedule or the cron's re-send of a lost copy brings
 * it back (see {@link moveToFailed}); `erased`, an erasure's event whose retrying is over,
 * removed without a failed event because its app user was erased again since; or `gone`:
 * delivered after all, or moved already.
 */
export async function deadLetter(
  db: D1Database,
  eventId: string,
  now: Date,
  windowMs: number,
): Promise<"failed" | "scheduled" | "erased" | "gone"> {
  const [moved, removed, left] = await runBatch(db, [...moveToFailed(eventId, now, windowMs), undeliveredEvent(eventId)]);
  if (moved!.meta.changes === 1) return "failed";
  if (removed!.meta.changes === 1) return "erased";
  return left!.results.length > 0 ? "scheduled" : "gone";
}

/**
 * What the home shard's `push_endpoint` row lets a batch do while the push service was last seen
 * down: `up` (another probe got through: deliver), `probe` (push one event, then tell how it
 * went), or `wait` (another probe is due later: push nothing).
 */
export type ProbeGate = "up" | "probe" | "wait";

/** Asks the home shard for the next probe slot at `now`, one D1 round trip; see {@link ProbeGate}. */
export async function takeProbe(home: D1Database, now: Date, probeMs: number): Promise<ProbeGate> {
  const [taken, state] = await runBatch(home, takeProbeStatements(now, new Date(now.getTime() + probeMs)));
  if (taken!.results.length > 0) return "probe";
  return (state!.results[0] as { down_since: string | null } | undefined)?.down_since == null ? "up" : "wait";
}

/**
 * Records on every shard (`shards`, the home shard first) that every push of a batch failed at
 * `now`: probes only, the first from `now + probeMs`. Each shard's cron sweep reads its own copy.
 */
export async function markEndpointDown(shards: readonly D1Database[], now: Date, probeMs: number): Promise<void> {
  const statement = markEndpointDownStatement(now, new Date(now.getTime() + probeMs));
  await Promise.all(shards.map((db) => bound(db, statement).run()));
}

/**
 * Records on every shard that a probe got through at `now`, each shard on its own: one whose
 * write fails holds up no other (the home shard above all, whose copy every isolate asks), and
 * learns it from its next push that gets through ({@link settleEvents}' `upAt`).
 *
 * @throws AggregateError naming how many shards did not record it, after every other did.
 */
export async function markEndpointUp(shards: readonly D1Database[], now: Date): Promise<void> {
  const statement = markEndpointUpStatement(now);
  const written = await Promise.allSettled(shards.map((db) => bound(db, statement).run()));
  const failed = written.flatMap((result) => (result.status === "rejected" ? [result.reason as unknown] : []));
  if (failed.length > 0) throw new AggregateError(failed, `${failed.length} of ${shards.length} shards did not record the push service up`);
}

/** The push service as a shard's copy last saw it: down since when (null: up), and up since when. */
export async function endpointState(db: D1Database): Promise<{ downSince: Date | null; upSince: Date | null }> {
  const row = await bound(db, endpointStateStatement()).first<{ down_since: string | null; up_since: string | null }>();
  const date = (value: string | null | undefined) => (value == null ? null : new Date(value));
  return { downSince: date(row?.down_since), upSince: date(row?.up_since) };
}

/** Deletes up to `limit` outbox rows delivered before `before`; returns how many. */
export async function purgeDelivered(db: D1Database, before: Date, limit: number): Promise<number> {
  const { meta } = await bound(db, purgeDeliveredStatement(before, limit)).run();
  return meta.changes;
}

/**
 * The most shards one feed request reads, a statement each: D1 allows a Worker invocation 1,000
 * queries, and the request needs room for nothing else on D1. Past it a feed request would fail
 * at D1's limit halfway; it fails at once instead, naming why in the log (docs/scale.md).
 */
export const FEED_SHARD_BUDGET = 500;

/** A page of the event feed: the events as the app gets them, and the cursor to go on from. */
export type FeedPage =
  | { found: true; events: string[]; next: string | null }
  /** `after` is not in the outbox (never was, purged, or erased): no page. */
  | { found: false };

/**
 * Up to `limit` events of every shard after `after` (or from `from`, the window's first
 * possible event_id, without one) and before `before` (an event_id or a prefix of one: the feed's
 * settled part), in event_id order: one statement per shard, all at once, each cut at `limit`,
 * merged and cut at `limit` again, so no event can be passed over. `after`'s own shard reads one
 * row more, `after` itself, which proves it is still there.
 *
 * @throws Error when there are more shards than {@link FEED_SHARD_BUDGET}.
 */
export async function readFeed(
  shards: readonly { db: D1Database; tag: number }[],
  position: { after: { eventId: string; shardTag: number } } | { from: string },
  before: string,
  limit: number,
): Promise<FeedPage> {
  if (shards.length > FEED_SHARD_BUDGET) {
    throw new Error(`event feed: ${shards.length} shards, more than the ${FEED_SHARD_BUDGET} one request may read`);
  }
  const after = "after" in position ? position.after : undefined;
  const from = after?.eventId ?? ("from" in position ? position.from : "");
  const pages = await Promise.all(
    shards.map(async (shard) => {
      const own = shard.tag === after?.shardTag;
      const { results } = await bound(shard.db, feedPage(from, before, own ? limit + 1 : limit)).all<FeedRow>();
      return { own, rows: results };
    }),
  );
  const rows: FeedRow[] = [];
  for (const { own, rows: page } of pages) {
    if (own && page[0]?.event_id !== after?.eventId) return { found: false };
    rows.push(...(own ? page.slice(1) : page));
  }
  const events = rows.sort((a, b) => (a.event_id < b.event_id ? -1 : 1)).slice(0, limit);
  return {
    found: true,
    events: await Promise.all(events.map(async (row) => pushedEvent(row.payload, (await pushedBody(row)) ?? row.archived_body))),
    next: events.at(-1)?.event_id ?? null,
  };
}

type FeedRow = ReceiptColumns & {
  event_id: string;
  payload: string;
  /** The body the archive's move kept of a created event's receipt it took (migration 0019). */
  archived_body: string | null;
};
