/**
 * Every statement on the outbox (`notice_outbox`) and the failed events (`failed_notices`),
 * migration 0003, docs/storage.md: the one place that writes SQL on those tables. The Workers run
 * these statements through operations.ts; the operator script (`npm run notices`), the erasure
 * and the soak run them on Node, so this file stays free of Workers types.
 *
 * An event's life, and the statement that moves it on:
 *
 * - `recorded`: in the outbox, in the same batch as the change it tells of (a created event in
 *   add's own insert, from {@link eventColumns}; {@link recordDeletedIfOwned},
 *   {@link recordDeletedIfArchivedOwned}, {@link recordErasedEvent}), or back there ({@link replayFailed});
 * - `enqueued`: a queue copy is known to have arrived: a delivery claimed it ({@link claimEventsStatement}),
 *   or the cron job handed it over again ({@link markEnqueuedStatement}). The send after the response
 *   marks nothing, so that an add or a delete stays one D1 write: the cron job hands over again
 *   what stays recorded past its grace period (never claimed: its send failed, its copy was lost
 *   or still waits in the queue) or enqueued and undelivered for too long ({@link pendingEventsStatement}),
 *   and a second copy is never pushed twice, as the claim decides;
 * - `claimed`: one delivery holds it until its claim runs out ({@link claimEventsStatement}), then
 *   `delivered` ({@link markDelivered}) or, after a failed attempt, back to enqueued with its
 *   error and when its next attempt is due ({@link recordFailedAttempt}), for the cron job to hand
 *   it over again then ({@link pendingEventsStatement});
 * - `failed`: moved to the failed events by the dead-letter queue's consumer ({@link moveToFailed}),
 *   still claimed from the attempt that dead-lettered it until then;
 * - `purged`: deleted, 14 days after delivery ({@link purgeDeliveredStatement}) or by an erasure
 *   ({@link eraseEventsOfReceipts}, {@link eraseLeftoverEventsOfReceipts}).
 *
 * The event feed ({@link feedPage}) reads events in every state but `purged`.
 *
 * Beside the events, the home shard's `push_endpoint` row (migration 0013) says whether the app
 * push service is down; while it is, the notifier pushes a probe now and then ({@link takeProbeStatements})
 * and the cron job hands over only probe candidates ({@link probeCandidatesStatement}).
 */
import type { AppUserErasedEvent } from "../../shared/schemas.ts";
import type { CreationNotice, DeletionNotice } from "../../shared/types.ts";
import { archivedOwned } from "../archive/owners.ts";
import { erasedAgainSince } from "../audit.ts";
import { liveOwned } from "../ownership.ts";
import { enclose, statement, type Statement } from "../statement.ts";
import { STORED_COLUMNS } from "../stored-body.ts";

/** Where an event is in its life (see above); `failed` and `purged` have no outbox row. */
export type EventState = "recorded" | "enqueued" | "claimed" | "delivered" | "failed" | "purged";

/** The columns of an outbox row that tell its state. */
export interface OutboxRowState {
  enqueued_at: string | null;
  claimed_until: string | null;
  delivered_at: string | null;
}

/** The state of an event from its outbox row at `now`: a claim that ran out claims nothing. */
export function stateOfRow(row: OutboxRowState, now: Date): Exclude<EventState, "failed" | "purged"> {
  if (row.delivered_at !== null) return "delivered";
  if (row.claimed_until !== null && row.claimed_until > now.toISOString()) return "claimed";
  return row.enqueued_at === null ? "recorded" : "enqueued";
}

/** An event_id as the Workers make them (UUIDv7, lower-case): what `npm run notices -- replay` accepts. */
export const EVENT_ID_PATTERN = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

// The one outbox insert but add's (see {@link eventColumns}); ?5 onwards are the condition's. A
// retry finds its own row and adds none. Through the view event_records (migration 0018), whose
// trigger aborts the whole batch when the event commits too late for the event feed.
function recordEvent(
  event: { event_id: string; occurred_at: string },
  receiptId: string,
  condition: string,
  ...conditionParams: string[]
): Statement {
  const { event_id, event_payload, event_at } = eventColumns(event);
  return statement(
    `INSERT INTO event_records (event_id, receipt_id, payload, created_at)
    SELECT ?1, ?2, ?3, ?4 WHERE ${condition}`,
    event_id,
    receiptId,
    event_payload,
    event_at,
    ...conditionParams,
  );
}

/**
 * An event as its outbox row holds it. Add hands its created event over in these columns to its
 * insert into the view `receipt_timely_adds` (migrations 0014, 0015, 0022, 0025, src/storage/receipts.ts), whose trigger
 * records it with the receipt in the same statement, only where that statement stored the
 * receipt: a replayed add, which stores nothing, records no second event.
 */
export function eventColumns(event: { event_id: string; occurred_at: string }): { event_id: string; event_payload: string; event_at: string } {
  return { event_id: event.event_id, event_payload: JSON.stringify(event), event_at: event.occurred_at };
}

/**
 * Records a deletion's event, only while the receipt exists with the event's client_id, chain_id
 * and app_user_id and no erasure's fence of `userKey` covers it (src/storage/ownership.ts): in
 * delete's batch before the receipt's removal, under the same condition.
 */
export function recordDeletedIfOwned(event: DeletionNotice, userKey: string): Statement {
  return recordEvent(
    event,
    event.receipt_id,
    liveOwned({ receiptId: "?2", clientId: "?5", chainId: "?6", appUserId: "?7", userKey: "?8" }),
    event.client_id,
    event.chain_id,
    event.app_user_id,
    userKey,
  );
}

/**
 * Records the deletion's event of an archived receipt made at `createdAt`, only while its owner
 * row has the event's client_id, chain_id and app_user_id and no erasure's fence of `userKey`
 * covers it: in the archived delete's batch before that row's removal,
 * under the same condition (src/storage/archive/deletion.ts), so that of two racing deletes one
 * records an event.
 */
export function recordDeletedIfArchivedOwned(event: DeletionNotice, userKey: string, createdAt: string): Statement {
  const condition = archivedOwned({ receiptId: "?2", clientId: "?5", chainId: "?6", appUserId: "?7", userKey: "?8", createdAt: "?9" });
  return recordEvent(event, event.receipt_id, condition, event.client_id, event.chain_id, event.app_user_id, userKey, createdAt);
}

/**
 * Records an erasure's event, only where `condition` holds (SQL over the parameters ?5 onwards,
 * `conditionParams`: the erasure's last step records it unless it did before, with a fresh
 * event_id each run). The step then hands it to the queue (the cron job sends it if that fails).
 * It is about no receipt, so its row's receipt_id is its own ID: a later erasure of the same app
 * user finds it by that ID ({@link eraseLeftoverEventsOfReceipts}).
 */
export function recordErasedEvent(event: AppUserErasedEvent, condition: string, ...conditionParams: string[]): Statement {
  return recordEvent(event, event.event_id, condition, ...conditionParams);
}

/**
 * An SQL expression, 1 when the event whose ID is the parameter `eventIdParam` is in the outbox,
 * else 0: a retried delete's proof that its first run committed, read in the same statement as
 * the receipt's owner.
 */
export function eventRecorded(eventIdParam: string): string {
  return `EXISTS (SELECT 1 FROM notice_outbox WHERE event_id = ${eventIdParam})`;
}

/**
 * SQL that is true while an event of the live receipt `receiptId` (a column) is not delivered
 * yet, in the outbox or among the failed ones (an operator may replay those): a created event's
 * push reads the receipt's body from its row, so the row stays until then. A live receipt's only
 * event is its created one, found in the primary key's range of the receipt's millisecond.
 */
export function eventUndelivered(receiptId: string): string {
  return `(EXISTS (SELECT 1 FROM notice_outbox WHERE ${eventOfReceiptMadeIn("notice_outbox", receiptId, `substr(${receiptId}, 1, 13)`)}
        AND delivered_at IS NULL)
    OR EXISTS (SELECT 1 FROM failed_notices WHERE failed_notices.receipt_id = ${receiptId}))`;
}

/**
 * → enqueued: the cron job handed these events to the queue again at `now`; a due attempt is on
 * its way, so none is due any more.
 */
export function markEnqueuedStatement(eventIds: readonly string[], now: Date): Statement {
  return statement(
    "UPDATE notice_outbox SET enqueued_at = ?1, next_attempt_at = NULL WHERE event_id IN (SELECT value FROM json_each(?2))",
    now.toISOString(),
    JSON.stringify(eventIds),
  );
}

/**
 * Events to hand to the queue (again), oldest first, at most `limit`, none claimed at `now`:
 * recorded before `unsentBefore` and never claimed nor re-sent; due for their next attempt by
 * `now`; last claimed or re-sent before `upSince`, when the push service came back (the notifier
 * acked them unpushed while it was down); or, with no attempt scheduled, last claimed or re-sent
 * before `lostBefore` and still undelivered, whose queue copy must have been lost. Rows:
 * `event_id`, `payload`.
 */
export function pendingEventsStatement(
  { unsentBefore, lostBefore, upSince }: { unsentBefore: Date; lostBefore: Date; upSince: Date | null },
  now: Date,
  limit: number,
): Statement {
  return statement(
    `SELECT event_id, payload FROM notice_outbox
    WHERE delivered_at IS NULL AND (claimed_until IS NULL OR claimed_until <= ?4)
      AND ((enqueued_at IS NULL AND created_at <= ?1) OR next_attempt_at <= ?4 OR enqueued_at < ?5
        OR (next_attempt_at IS NULL AND enqueued_at <= ?2))
    ORDER BY created_at LIMIT ?3`,
    unsentBefore.toISOString(),
    lostBefore.toISOString(),
    limit,
    now.toISOString(),
    upSince?.toISOString() ?? "",
  );
}

/**
 * While the push service is down: the oldest `limit` events whose attempt is due by `now` and
 * that no delivery holds, for the notifier to probe the push service with. Rows as
 * {@link pendingEventsStatement}.
 */
export function probeCandidatesStatement(now: Date, limit: number): Statement {
  return statement(
    `SELECT event_id, payload FROM notice_outbox
    WHERE delivered_at IS NULL AND (claimed_until IS NULL OR claimed_until <= ?1)
      AND (next_attempt_at IS NULL OR next_attempt_at <= ?1)
    ORDER BY created_at LIMIT ?2`,
    now.toISOString(),
    limit,
  );
}

/**
 * SQL true for the outbox row `event` when it is an event of the receipt `receiptId` made in the
 * millisecond whose ID prefix `made` gives (both SQL expressions). The outbox has no index by
 * receipt (migration 0012): an event_id is a UUIDv7 that begins with the millisecond its event was
 * made, so a receipt's events are found in a range of the primary key. A created event is made in
 * the millisecond of its receipt_id (`substr(receipt_id, 1, 13)`), a deleted event in that of the
 * deletion ({@link idPrefixAt} of its audit record's `at`); an erasure's event, filed under its
 * own ID, in that of its receipt_id.
 */
function eventOfReceiptMadeIn(event: string, receiptId: string, made: string): string {
  return `${event}.event_id > ${made} AND ${event}.event_id < ${made} || '~' AND ${event}.receipt_id = ${receiptId}`;
}

/** SQL of the 13 characters every UUIDv7 made in the millisecond of `isoTime` (an SQL expression) begins with. */
function idPrefixAt(isoTime: string): string {
  const ms = `CAST(round(unixepoch(${isoTime}, 'subsec') * 1000) AS INTEGER)`;
  return `printf('%08x-%04x', ${ms} >> 16, ${ms} & 65535)`;
}

// The undelivered created event of the same receipt as the outbox row at hand: a deleted event
// waits while it is pushed, so that the app never hears of a receipt after its deletion.
const CREATED_EVENT_OF_ITS_RECEIPT = `FROM notice_outbox AS created
      WHERE ${eventOfReceiptMadeIn("created", "notice_outbox.receipt_id", "substr(notice_outbox.receipt_id, 1, 13)")}
        AND created.event_id <> notice_outbox.event_id
        AND created.delivered_at IS NULL AND json_extract(created.payload, '$.type') = 'receipt.created'`;

/**
 * The receipt's stored columns (src/storage/stored-body.ts `STORED_COLUMNS`) of the row whose
 * receipt_id is `receiptId` (an SQL expression), for a SELECT or RETURNING list: each NULL where
 * the receipt is not stored (`body` is never NULL on a stored one). What a created event carries
 * of its receipt is made of them in TypeScript (`receiptAsPushed`): add stores the texts deflated.
 * A subquery a column, since RETURNING takes no join: each finds the row by its primary key.
 */
function storedReceiptColumns(receiptId: string): string {
  return STORED_COLUMNS.map((column) => `(SELECT ${column} FROM receipts WHERE receipts.receipt_id = ${receiptId}) AS ${column}`).join(",\n      ");
}

/**
 * SQL of the time (ms) the push service was down as a whole, summed, on this shard's copy of its
 * state at `now` (an SQL parameter): the outages that ended, and the one going on (migration 0023).
 */
function downMsAt(now: string): string {
  return `(SELECT down_ms + CASE WHEN down_since IS NULL THEN 0 ELSE MAX(0, ${msOf(now)} - ${msOf("down_since")}) END
    FROM push_endpoint WHERE id = 1)`;
}

/** SQL of the ISO time `isoTime` (an SQL expression) in whole milliseconds (of the Julian day count: for differences). */
function msOf(isoTime: string): string {
  return `CAST(round(julianday(${isoTime}) * 86400000) AS INTEGER)`;
}

/**
 * SQL of the time (ms) the push service was down since the retry window of the outbox row at hand
 * opened, at `now`; NULL before its window opened. An event's window counts only the time the push
 * service was up: while it is down the notifier holds the event back ({@link takeProbe}), and
 * its window is not to run out meanwhile.
 */
function pausedMsAt(now: string): string {
  return `${downMsAt(now)} - notice_outbox.window_down_ms`;
}

/**
 * SQL of the notifier's own lateness (ms) on the outbox row at hand at `now` (migration 0024): the
 * lateness of every attempt it made since the event's window opened (`late_ms`), and that of the
 * attempt due now, from its due time to `now`, less the push service's down time since the failure
 * that scheduled it (the down-time allowance has it, {@link pausedMsAt}); 0 for an attempt not due
 * yet, and before the window opened. A window is to count the time its event's attempts were made
 * on time: one the notifier made late, starved of CPU with its claims running out before their
 * pushes, must not use it up.
 */
function lateMsAt(now: string): string {
  return `(notice_outbox.late_ms + CASE WHEN notice_outbox.attempt_due_at IS NULL THEN 0
      ELSE MAX(0, ${msOf(now)} - ${msOf("notice_outbox.attempt_due_at")} - (${downMsAt(now)} - notice_outbox.attempt_down_ms)) END)`;
}

/**
 * → claimed: takes the events for one push attempt until `until`, unless delivered, held by an
 * unexpired claim at `now`, or waiting for its receipt's created event in flight; returns no
 * row for those. A claim also marks the event enqueued at `now`: its queue copy arrived, so the
 * cron job leaves it to its schedule until it counts as lost. Rows: `event_id`, `payload`,
 * `attempts`, `retry_until`, `paused_ms` (the push service's down time since its window opened,
 * {@link pausedMsAt}), `late_ms` (the notifier's lateness, this attempt's included: the claim of
 * the push that makes an attempt is where it is measured, {@link lateMsAt}; the push's own length
 * is the push service's, and a push never begins after its claim ran out), the receipt's stored columns ({@link storedReceiptColumns}), which a
 * created event's push carries (`body` null once the receipt is deleted), and `endpoint_down`, 1
 * while the shard's copy of the push service's state says down.
 */
export function claimEventsStatement(eventIds: readonly string[], until: Date, now: Date): Statement {
  return statement(
    `UPDATE notice_outbox SET claimed_until = ?2, attempts = attempts + 1, enqueued_at = ?3
    WHERE event_id IN (SELECT value FROM json_each(?1))
      AND delivered_at IS NULL AND (claimed_until IS NULL OR claimed_until <= ?3)
      AND NOT EXISTS (SELECT 1 ${CREATED_EVENT_OF_ITS_RECEIPT} AND created.claimed_until > ?3)
    RETURNING event_id, payload, attempts, retry_until, ${pausedMsAt("?3")} AS paused_ms, ${lateMsAt("?3")} AS late_ms,
      ${storedReceiptColumns("notice_outbox.receipt_id")},
      (SELECT down_since IS NOT NULL FROM push_endpoint WHERE id = 1) AS endpoint_down`,
    JSON.stringify(eventIds),
    until.toISOString(),
    now.toISOString(),
  );
}

/**
 * What a claim that took nothing found: each event's state columns, and until when its
 * receipt's created event is claimed (`created_claimed_until`). No row: failed or purged.
 */
export function claimStates(eventIds: readonly string[]): Statement {
  return statement(
    `SELECT event_id, enqueued_at, delivered_at, claimed_until,
      (SELECT MAX(created.claimed_until) ${CREATED_EVENT_OF_ITS_RECEIPT}) AS created_claimed_until
    FROM notice_outbox WHERE event_id IN (SELECT value FROM json_each(?1))`,
    JSON.stringify(eventIds),
  );
}

/** claimed → delivered, at `now`. */
export function markDelivered(eventIds: readonly string[], now: Date): Statement {
  return statement(
    `UPDATE notice_outbox SET delivered_at = ?2, claimed_until = NULL, next_attempt_at = NULL
    WHERE event_id IN (SELECT value FROM json_each(?1))`,
    JSON.stringify(eventIds),
    now.toISOString(),
  );
}

// An outbox row that is an erasure's event (filed under its own ID) of an app user erased again
// since: any other row is told apart by its receipt_id before the audit trail is read.
const erasureTakenAgain = `(receipt_id = event_id AND ${erasedAgainSince("event_id", "json_extract(payload, '$.occurred_at')")})`;

/**
 * delivered → purged: those of `eventIds` that are an erasure's event whose app user a later
 * erasure has erased since ({@link erasedAgainSince}). That erasure took the earlier ones' events
 * it found delivered; one still to deliver stayed so that the app is told, and goes once it is.
 * Any other event's row has a receipt_id of its own and is left.
 */
export function forgetErasedAgain(eventIds: readonly string[]): Statement {
  return statement(
    `DELETE FROM notice_outbox WHERE event_id IN (SELECT value FROM json_each(?1)) AND ${erasureTakenAgain}`,
    JSON.stringify(eventIds),
  );
}

/**
 * claimed → enqueued: keeps the attempt's error, frees the claim (a copy that comes early may try
 * at once), and records when the next attempt is due and the end of the event's retry window.
 * The window's first failure also notes the push service's down time so far, which the window
 * does not count ({@link pausedMsAt}); each failure keeps the next attempt's due time and the
 * down time then, from which the claim that makes it measures its lateness, and the lateness so
 * far (`lateMs`, the claim's), which the window does not count either ({@link lateMsAt}). With no schedule the event is on its way to the dead
 * letters: its window ends at `now`, with no down time nor lateness to add, which is what lets the
 * dead-letter queue's consumer move it ({@link moveToFailed}), and its claim
 * stays until it runs out: a copy that came meanwhile (a re-send, a bundle retried whole) would
 * push a refused event again, and a failure of that push would be the last error the operator reads.
 */
export function recordFailedAttempt(
  eventId: string,
  error: string,
  schedule: { nextAttemptAt: Date; retryUntil: Date; lateMs: number } | null,
  now: Date,
): Statement {
  return statement(
    `UPDATE notice_outbox SET last_error = ?2, claimed_until = CASE WHEN ?3 IS NULL THEN claimed_until END, next_attempt_at = ?3,
      retry_until = COALESCE(?4, retry_until),
      window_down_ms = CASE WHEN ?3 IS NULL THEN NULL ELSE COALESCE(window_down_ms, ${downMsAt("?5")}) END,
      attempt_due_at = ?3, attempt_down_ms = CASE WHEN ?3 IS NULL THEN NULL ELSE ${downMsAt("?5")} END, late_ms = ?6
    WHERE event_id = ?1`,
    eventId,
    error,
    schedule?.nextAttemptAt.toISOString() ?? null,
    (schedule?.retryUntil ?? now).toISOString(),
    now.toISOString(),
    Math.max(0, Math.round(schedule?.lateMs ?? 0)),
  );
}

/** Stands in for the last error of an event that was dead-lettered before any attempt failed. */
const NO_ERROR_RECORDED = "dead-lettered with no failed attempt recorded";

/**
 * → failed: moves an undelivered event whose retrying is over from the outbox to the failed
 * events at `now`, keeping its attempts and last error, as one batch of two. Over means its retry
 * window of `windowMs` ended by `now`, the push service's down time since it opened and the
 * notifier's lateness added, the attempt overdue now's included (at most a window more in all, as
 * src/notifier/retry.ts; a refusal ends it at once, {@link recordFailedAttempt}), or, for an event no push of which failed
 * yet, that it was made a window or more before `now`. Any
 * other stays where it is, to its schedule: the queue dead-letters a message that met its retries
 * for reasons of its own (copies held by another delivery, claims run out behind a slow push
 * service, D1 failures), and such an event is on the cron's way back to the queue, not dead. A
 * delivered one stays too (another copy got through); a second move of one event changes nothing.
 * An erasure's event whose app user a later erasure has erased since ({@link erasedAgainSince})
 * leaves the outbox without becoming a failed event: that erasure takes the earlier one's failed
 * events, and kept, this one would name the user after it. The first statement's change count
 * says whether it moved, the second's whether it left.
 */
export function moveToFailed(eventId: string, now: Date, windowMs: number): [Statement, Statement] {
  // The window's end, the down time since it opened and the lateness added (at most a window
  // more in all), as {@link pausedMsAt} and {@link lateMsAt}.
  const extension = `MAX(COALESCE(${pausedMsAt("?2")}, 0), 0) + MAX(COALESCE(${lateMsAt("?2")}, 0), 0)`;
  const over = (windowParam: string) => `event_id = ?1 AND delivered_at IS NULL AND (
      (retry_until IS NOT NULL AND ${msOf("retry_until")} + MIN(${extension}, ${windowParam}) <= ${msOf("?2")})
      OR (retry_until IS NULL AND ${msOf("created_at")} + ${windowParam} <= ${msOf("?2")}))`;
  return [
    statement(
      `INSERT INTO failed_notices (event_id, receipt_id, payload, created_at, failed_at, attempts, last_error)
      SELECT event_id, receipt_id, payload, created_at, ?2, attempts, COALESCE(last_error, ?3)
      FROM notice_outbox WHERE ${over("?4")} AND NOT ${erasureTakenAgain}
      ON CONFLICT (event_id) DO NOTHING`,
      eventId,
      now.toISOString(),
      NO_ERROR_RECORDED,
      windowMs,
    ),
    statement(`DELETE FROM notice_outbox WHERE ${over("?3")}`, eventId, now.toISOString(), windowMs),
  ];
}

/** The event `eventId` if it is in the outbox undelivered: one row, `event_id`, or none. */
export function undeliveredEvent(eventId: string): Statement {
  return statement("SELECT event_id FROM notice_outbox WHERE event_id = ?1 AND delivered_at IS NULL", eventId);
}

/**
 * Every failed event, oldest failure first. Rows: `event_id`, `type` (the event's, from its
 * payload), `receipt_id`, `failed_at`, `attempts`, `last_error`.
 */
export function listFailed(): Statement {
  return statement(
    `SELECT event_id, json_extract(payload, '$.type') AS type, receipt_id, failed_at, attempts, last_error
    FROM failed_notices ORDER BY failed_at, event_id`,
  );
}

/**
 * Failed events one replay moves back on a shard at most, the oldest first: one short transaction
 * however many dead letters a long outage left; the operator runs the command again for the rest.
 */
export const REPLAY_PAGE = 1000;

/**
 * failed → recorded: moves failed events back into the outbox as neither enqueued nor delivered,
 * with fresh attempts, as one batch of two; the cron job then sends them within a minute. No
 * `eventIds` means every failed event, up to {@link REPLAY_PAGE} of them. The second statement's
 * rows are the replayed events: `event_id`, `receipt_id`.
 */
export function replayFailed(eventIds: readonly string[]): [Statement, Statement] {
  // Both statements take the same page: the oldest of the chosen, in one transaction.
  const chosen = `event_id IN (SELECT event_id FROM failed_notices
    WHERE json_array_length(?1) = 0 OR event_id IN (SELECT value FROM json_each(?1)) ORDER BY event_id LIMIT ${REPLAY_PAGE})`;
  const ids = JSON.stringify(eventIds);
  return [
    statement(
      `INSERT INTO notice_outbox (event_id, receipt_id, payload, created_at, attempts, last_error)
      SELECT event_id, receipt_id, payload, created_at, 0, last_error FROM failed_notices WHERE ${chosen}
      ON CONFLICT (event_id) DO UPDATE SET enqueued_at = NULL, delivered_at = NULL, claimed_until = NULL, attempts = 0,
        next_attempt_at = NULL, retry_until = NULL, window_down_ms = NULL,
        attempt_due_at = NULL, attempt_down_ms = NULL, late_ms = 0`,
      ids,
    ),
    statement(`DELETE FROM failed_notices WHERE ${chosen} RETURNING event_id, receipt_id`, ids),
  ];
}

/**
 * delivered → purged: up to `limit` events delivered at or before `before`, so that one statement
 * stays small. An event is delivered after it is made, and its event_id (UUIDv7) begins with the
 * time it was made: the primary key's range of events made by `before` holds every row to purge,
 * oldest first, and no index on delivered_at is needed (migration 0007).
 */
export function purgeDeliveredStatement(before: Date, limit: number): Statement {
  return statement(
    `DELETE FROM notice_outbox WHERE event_id IN
    (SELECT event_id FROM notice_outbox WHERE event_id < ?3 AND delivered_at <= ?1 ORDER BY event_id LIMIT ?2)`,
    before.toISOString(),
    limit,
    uuidv7TimePrefix(before.getTime() + 1),
  );
}

// The first 13 characters of a UUIDv7 made at `msecs` ("0190a1b2-c3d4"): every ID made earlier
// sorts below it as text.
function uuidv7TimePrefix(msecs: number): string {
  const hex = msecs.toString(16).padStart(12, "0");
  return `${hex.slice(0, 8)}-${hex.slice(8)}`;
}

/**
 * → purged: every event, in the outbox and among the failed ones, of the stored receipts that
 * `receipts` selects (a query of one column, receipt_id, with its own parameters). A stored
 * receipt has no event but its created one: its deleted event is recorded as it goes.
 */
export function eraseEventsOfReceipts(receipts: Statement): [Statement, Statement] {
  return [
    enclose(
      receipts,
      (ids) => `DELETE FROM notice_outbox WHERE event_id IN (WITH receipt(receipt_id) AS (${ids})
      SELECT event.event_id FROM receipt JOIN notice_outbox AS event
        ON ${eventOfReceiptMadeIn("event", "receipt.receipt_id", "substr(receipt.receipt_id, 1, 13)")})`,
    ),
    // failed_notices holds dead letters until an operator replays them: few rows, no index.
    enclose(receipts, (ids) => `DELETE FROM failed_notices WHERE receipt_id IN (${ids})`),
  ];
}

/**
 * Keeps each receipt of `kept` as its created event carries it (src/storage/stored-body.ts
 * `receiptAsPushed`, made by the move from the row it read) in that event's row, where
 * `receipts` (a query of one column, receipt_id) selects it and while that row is in the outbox:
 * in the archive's batch that removes those receipts, before their removal, so that the event
 * feed still has their created events' bodies (migration 0019). A stored receipt has no event
 * but its created one, found in the primary key's range of the receipt's millisecond.
 */
export function keepBodiesOfArchived(receipts: Statement, kept: readonly { receipt_id: string; body: string }[]): Statement {
  return enclose(
    receipts,
    (ids, bodies) => `UPDATE notice_outbox SET archived_body = kept.value ->> 'body' FROM json_each(${bodies}) AS kept
    WHERE kept.value ->> 'receipt_id' = notice_outbox.receipt_id AND event_id IN (WITH receipt(receipt_id) AS (${ids})
      SELECT event.event_id FROM receipt JOIN notice_outbox AS event
        ON ${eventOfReceiptMadeIn("event", "receipt.receipt_id", "substr(receipt.receipt_id, 1, 13)")})`,
    JSON.stringify(kept),
  );
}

/**
 * SQL true while the created event of the receipt `receiptId` (an SQL expression) is in the
 * outbox: the archive's move then keeps its body there ({@link keepBodiesOfArchived}).
 */
export function createdEventKept(receiptId: string): string {
  return `EXISTS (SELECT 1 FROM notice_outbox WHERE ${eventOfReceiptMadeIn("notice_outbox", receiptId, `substr(${receiptId}, 1, 13)`)})`;
}

/**
 * → purged: a page of up to `limit` events of each table, of the receipts (stored or not) that
 * `receipts` selects: a query of at least the columns `receipt_id` and `at`, the time of a change
 * to the receipt that may have made an event of it besides its creation (a deletion), or null. Each
 * statement returns a row per event erased. With `deliveredOnly`, an outbox row still to deliver
 * stays: an earlier erasure's `app_user.erased` is what tells the app of that erasure, and a later
 * one that took it while it waited for its push would leave the app never told of the first.
 */
export function eraseLeftoverEventsOfReceipts(receipts: Statement, limit: number, deliveredOnly = false): [Statement, Statement] {
  const delivered = deliveredOnly ? " AND event.delivered_at IS NOT NULL" : "";
  return [
    enclose(
      receipts,
      (rows, page) => `DELETE FROM notice_outbox WHERE event_id IN (WITH receipt AS (${rows}),
        made(receipt_id, prefix) AS (SELECT receipt_id, substr(receipt_id, 1, 13) FROM receipt
          UNION SELECT receipt_id, ${idPrefixAt("at")} FROM receipt WHERE at IS NOT NULL)
      SELECT event.event_id FROM made JOIN notice_outbox AS event
        ON ${eventOfReceiptMadeIn("event", "made.receipt_id", "made.prefix")}${delivered} LIMIT ${page}) RETURNING 1`,
      limit,
    ),
    enclose(
      receipts,
      (rows, page) => `DELETE FROM failed_notices WHERE event_id IN (WITH receipt AS (${rows})
      SELECT event_id FROM failed_notices WHERE receipt_id IN (SELECT receipt_id FROM receipt) LIMIT ${page}) RETURNING 1`,
      limit,
    ),
  ];
}

/**
 * One shard's page of the event feed (docs/api.md#event-feed): up to `limit` events at or after
 * `from` and made before `before` (an event_id or a prefix of one), in event_id order, whatever
 * their state (recorded, enqueued, claimed, delivered, or failed: the feed is for catching up on
 * what the push did not bring). A created event whose receipt was deleted since is left out, as
 * the push leaves it out, unless it is `from` itself: the caller's cursor stays good, also one
 * past `before`; one whose receipt the archive moved keeps the body it kept ({@link keepBodiesOfArchived}).
 * Both tables are read down their primary key and stop at `limit`; an event is never in both (it
 * moves between them in one batch). Rows: `event_id`, `payload`, `archived_body`, and a created
 * event's receipt's stored columns (`STORED_COLUMNS`, joined once), each null for another event.
 */
export function feedPage(from: string, before: string, limit: number): Statement {
  const created = "json_extract(payload, '$.type') = 'receipt.created'";
  const stored = (table: string) => `EXISTS (SELECT 1 FROM receipts WHERE receipts.receipt_id = ${table}.receipt_id)`;
  // The outbox's row may keep the body of a receipt the archive moved; a failed event's receipt
  // is never moved (src/storage/archive/statements.ts).
  const kept = (table: string) => (table === "notice_outbox" ? `(${stored(table)} OR archived_body IS NOT NULL)` : stored(table));
  const archived = (table: string) => (table === "notice_outbox" ? "archived_body" : "NULL");
  const page = (table: string) => `SELECT * FROM (SELECT event_id, payload, CASE WHEN ${created} THEN receipt_id END AS created_receipt,
      CASE WHEN ${created} THEN ${archived(table)} END AS archived_body
    FROM ${table} WHERE event_id >= ?1
      AND (event_id = ?1 OR (event_id < ?3 AND (NOT ${created} OR ${kept(table)})))
    ORDER BY event_id LIMIT ?2)`;
  return statement(
    `SELECT page.event_id, page.payload, page.archived_body, ${STORED_COLUMNS.map((column) => `receipts.${column}`).join(", ")}
    FROM (${page("notice_outbox")}
      UNION ALL ${page("failed_notices")}
      ORDER BY event_id LIMIT ?2) AS page
    LEFT JOIN receipts ON receipts.receipt_id = page.created_receipt
    ORDER BY page.event_id`,
    from,
    limit,
    before,
  );
}

/** The outbox's part of a shard's health, columns of {@link outboxHealthColumns}. */
export interface OutboxHealth {
  /** Events not delivered yet, at most the cap. */
  undelivered: number;
  oldest_undelivered_at: string | null;
  /** Failed notices waiting for a replay, at most the cap. */
  failed_notices: number;
  /** This shard's copy of the push service's state (the notifier writes every shard). */
  endpoint_down_since: string | null;
  endpoint_up_since: string | null;
}

/**
 * The columns of {@link OutboxHealth}, for a SELECT list: the status reads them in one statement
 * with the rest of a shard's health (src/storage/health.ts), one query a shard. Each reads an
 * index's end, one row, or at most `capParam` rows (a parameter such as `?1`): a count of every
 * undelivered event would read every one.
 */
export function outboxHealthColumns(capParam: string): string {
  return `(SELECT COUNT(*) FROM (SELECT 1 FROM notice_outbox WHERE delivered_at IS NULL LIMIT ${capParam})) AS undelivered,
      (SELECT MIN(created_at) FROM notice_outbox WHERE delivered_at IS NULL) AS oldest_undelivered_at,
      (SELECT COUNT(*) FROM (SELECT 1 FROM failed_notices LIMIT ${capParam})) AS failed_notices,
      (SELECT down_since FROM push_endpoint WHERE id = 1) AS endpoint_down_since,
      (SELECT up_since FROM push_endpoint WHERE id = 1) AS endpoint_up_since`;
}

/** How many events are not delivered yet. Row: `n`. */
export function countUndelivered(): Statement {
  return statement("SELECT COUNT(*) AS n FROM notice_outbox WHERE delivered_at IS NULL");
}

/** How many failed events wait for a replay. Row: `n`. */
export function countFailed(): Statement {
  return statement("SELECT COUNT(*) AS n FROM failed_notices");
}

/**
 * Every event in the outbox, as a reconciliation reads it. Rows: `event_id`, `receipt_id`,
 * `type`, `delivered_at`, `app_user_id`.
 */
export function everyEvent(): Statement {
  return statement(
    `SELECT event_id, receipt_id, json_extract(payload, '$.type') AS type, delivered_at,
      json_extract(payload, '$.app_user_id') AS app_user_id FROM notice_outbox`,
  );
}

/** Every failed event. Rows: `event_id`, `receipt_id`. */
export function everyFailedEvent(): Statement {
  return statement("SELECT event_id, receipt_id FROM failed_notices");
}

/**
 * Takes the next probe of a push service that is down, as one batch of two: the first statement
 * returns a row when this caller may push one probe now (the slot then moves `probeMs` on, so
 * isolates racing for it get one probe between them); the second, `down_since`, says whether the
 * push service is still down (null: another probe got through).
 */
export function takeProbeStatements(now: Date, nextProbeAt: Date): [Statement, Statement] {
  return [
    statement(
      "UPDATE push_endpoint SET probe_at = ?2 WHERE id = 1 AND down_since IS NOT NULL AND (probe_at IS NULL OR probe_at <= ?1) RETURNING 1 AS probe",
      now.toISOString(),
      nextProbeAt.toISOString(),
    ),
    statement("SELECT down_since FROM push_endpoint WHERE id = 1"),
  ];
}

/** The push service failed every push of a batch at `now`: down, its first probe at `probeAt`. */
export function markEndpointDownStatement(now: Date, probeAt: Date): Statement {
  return statement(
    "UPDATE push_endpoint SET down_since = COALESCE(down_since, ?1), probe_at = ?2 WHERE id = 1",
    now.toISOString(),
    probeAt.toISOString(),
  );
}

/**
 * A probe got through at `now`: the push service is up, what waited before now goes out, and the
 * outage's length joins the down time that no event's retry window counts.
 */
export function markEndpointUpStatement(now: Date): Statement {
  return statement(`UPDATE push_endpoint SET down_ms = ${downMsAt("?1")}, down_since = NULL, up_since = ?1 WHERE id = 1`, now.toISOString());
}

/**
 * A push on this shard got through at `now` while the shard's copy said down since earlier: the
 * copy that missed a probe's "up" (its write failed then) learns it from its own next delivery.
 * Changes nothing while the copy says up, so `up_since` moves only when the push service came back.
 */
export function markEndpointUpIfDown(now: Date): Statement {
  return statement(
    `UPDATE push_endpoint SET down_ms = ${downMsAt("?1")}, down_since = NULL, up_since = ?1
    WHERE id = 1 AND down_since IS NOT NULL AND down_since <= ?1`,
    now.toISOString(),
  );
}

/** Whether the push service is down, and when it last came back. Row: `down_since`, `up_since`. */
export function endpointStateStatement(): Statement {
  return statement("SELECT down_since, up_since FROM push_endpoint WHERE id = 1");
}
