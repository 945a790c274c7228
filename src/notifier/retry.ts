/**
 * When the notifier tries an event again. Cloudflare Queues cap a message at 100 retries and a
 * retry's delay at 12 hours, which cannot carry a 72-hour schedule by themselves: a failed push's
 * next attempt is kept in the event's outbox row (migration 0013), and the API Worker's cron hands
 * the event to the queue again once it is due. Queue retries remain for a D1 failure, which
 * leaves nothing recorded, and for a copy held by another delivery.
 */

/** The backoff and its window, from RETRY_FIRST_DELAY_SECONDS, RETRY_MAX_DELAY_SECONDS and NOTICE_RETRY_HOURS. */
export interface RetrySchedule {
  firstDelaySeconds: number;
  maxDelaySeconds: number;
  /** How long after an event's first failed attempt its last one may be. */
  windowMs: number;
}

// Queues refuse longer delays.
const QUEUES_MAX_DELAY_SECONDS = 43_200;

/**
 * The delay before the next attempt after failed attempt number `attempts` (1 for the first):
 * the first delay doubling, at most the longest, then "equal jitter": a draw between half of it
 * and all of it, so that events failed together do not come back together. `random` is a draw
 * in [0, 1). A push service's `Retry-After` (seconds) is honoured when it asks for longer.
 */
export function retryDelaySeconds(
  attempts: number,
  schedule: Pick<RetrySchedule, "firstDelaySeconds" | "maxDelaySeconds">,
  random: number,
  retryAfterSeconds?: number,
): number {
  const backoff = Math.min(schedule.firstDelaySeconds * 2 ** Math.max(0, attempts - 1), schedule.maxDelaySeconds);
  const jittered = Math.ceil(backoff / 2 + (random * backoff) / 2);
  return Math.min(Math.max(jittered, retryAfterSeconds ?? 0), QUEUES_MAX_DELAY_SECONDS);
}

/**
 * What follows a failed attempt: the next one at `nextAttemptAt`, or the dead letters. With the
 * next one, the window as opened and the notifier's lateness so far, for the outbox to keep.
 */
export type NextAttempt = { deadLetter: false; nextAttemptAt: Date; retryUntil: Date; lateMs: number } | { deadLetter: true };

/**
 * The next attempt of an event whose attempt number `attempts` failed at `now`. Its window opens
 * at the first failed attempt (`retryUntil` is null until then) and counts only the time its
 * attempts could be made, and were on time:
 *
 * - `pausedMs`, how long the push service was down as a whole since it opened, moves the end
 *   later: the notifier held the event back meanwhile, and an outage shorter than the window must
 *   leave it its retries;
 * - so does `lateMs`, the notifier's own lateness: how long after their due times the attempts
 *   since were claimed, this one's included (the push service's down time not counted twice). An
 *   attempt the notifier scheduled and made late, starved of CPU, is no attempt the event had.
 *
 * Together they move it at most one window more, so that neither keeps an event alive for ever.
 * The last attempt falls on the window's end, and one that fails there or later dead-letters the
 * event. `retryUntil` in the answer is the window as opened, for the outbox to keep, with
 * `lateMs`; the down time is added anew at each attempt.
 */
export function nextAttempt(
  attempt: { attempts: number; retryUntil: Date | null; pausedMs?: number; lateMs?: number; retryAfterSeconds?: number },
  schedule: RetrySchedule,
  now: Date,
  random = Math.random(),
): NextAttempt {
  const retryUntil = attempt.retryUntil ?? new Date(now.getTime() + schedule.windowMs);
  const lateMs = Math.max(attempt.lateMs ?? 0, 0);
  const windowEnd = retryUntil.getTime() + Math.min(Math.max(attempt.pausedMs ?? 0, 0) + lateMs, schedule.windowMs);
  if (now.getTime() >= windowEnd) return { deadLetter: true };
  const due = now.getTime() + retryDelaySeconds(attempt.attempts, schedule, random, attempt.retryAfterSeconds) * 1000;
  return { deadLetter: false, nextAttemptAt: new Date(Math.min(due, windowEnd)), retryUntil, lateMs };
}
