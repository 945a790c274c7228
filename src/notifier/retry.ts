/**
 * When the notifier tries a notice again. Cloudflare Queues redelivers a message retried with
 * `delaySeconds` after that delay, and moves it to the dead-letter queue once `max_retries` in
 * wrangler.toml is used up; the two together set how long the push service may be down before a
 * notice needs an operator.
 */

/** The backoff, from RETRY_FIRST_DELAY_SECONDS and RETRY_MAX_DELAY_SECONDS (src/shared/config.ts). */
export interface RetrySchedule {
  firstDelaySeconds: number;
  maxDelaySeconds: number;
}

// Queues refuses longer delays.
const QUEUES_MAX_DELAY_SECONDS = 43_200;

/**
 * The delay before the next attempt after failed attempt number `attempts` (1 for the first):
 * the first delay, doubling, at most the longest. As deployed (10 s to 10 min, max_retries = 10)
 * a notice is tried 11 times over about 50 minutes before it is dead-lettered. A push service's
 * `Retry-After` (seconds) is honoured when it asks for longer.
 */
export function retryDelaySeconds(attempts: number, schedule: RetrySchedule, retryAfterSeconds?: number): number {
  const backoff = Math.min(schedule.firstDelaySeconds * 2 ** Math.max(0, attempts - 1), schedule.maxDelaySeconds);
  return Math.min(Math.max(backoff, retryAfterSeconds ?? 0), QUEUES_MAX_DELAY_SECONDS);
}
