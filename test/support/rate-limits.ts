/**
 * The limits per client as tests reach them (docs/api.md#rate-limits): a client's count in the
 * current window spent through the Worker's own Rate Limiting binding, the counter its requests
 * count on, so that a test reaches a limit of 1,200 without sending 1,200 requests.
 */
import { env } from "cloudflare:workers";
import { expect } from "vitest";
import type { RatePolicy } from "../../src/shared/rate-limits.ts";

/**
 * Waits, if need be, for the start of a window of the limiter, so that what a test spends and
 * what it then sends fall in one window (spending 1,200 takes seconds on a busy machine). A test
 * starts at once while at least `room` of the current window is left: waiting for the next start
 * every time cost a test most of a window. Returns when the window it starts in ends.
 */
export async function freshWindow(policy: RatePolicy, room = WINDOW_ROOM): Promise<number> {
  const windowMs = policy.windowSeconds * 1000;
  if (windowMs - (Date.now() % windowMs) < windowMs * room) await scheduler.wait(windowMs - (Date.now() % windowMs) + 20);
  const now = Date.now();
  return now - (now % windowMs) + windowMs;
}

/** Waits for the start of the next window of the limiter: whatever was counted before is behind. */
export async function nextWindow(policy: RatePolicy): Promise<void> {
  const windowMs = policy.windowSeconds * 1000;
  await scheduler.wait(windowMs - (Date.now() % windowMs) + 20);
}

/**
 * Runs `attempt`, which spends a fresh client's limit and sends its requests, in a window with
 * `room` left for it (freshWindow), and again (at most five times in all) while an attempt
 * outlasted its window: on a busy machine, spending 1,200 can take most of the 10 s. A test
 * that sends its requests after the attempt asks for more room.
 */
export async function withinOneWindow<T>(policy: RatePolicy, attempt: (windowEnd: number) => Promise<T>, room = WINDOW_ROOM): Promise<T> {
  for (let tries = 1; ; tries += 1) {
    const windowEnd = await freshWindow(policy, room);
    const result = await attempt(windowEnd);
    if (Date.now() < windowEnd || tries === ATTEMPTS) return result;
  }
}

const ATTEMPTS = 5;

// The share of a window that must be left for a test to start in it: an attempt takes under a
// second on an idle machine and a few on a busy one, and one that outlasts its window is tried again.
const WINDOW_ROOM = 0.5;

/** Spends `count` of the client's requests in the current window, through the Worker's own binding. */
export async function spend(policy: RatePolicy, clientId: string, count: number): Promise<void> {
  const binding = env[policy.binding];
  for (let done = 0; done < count; done += SPEND_AT_ONCE) {
    const calls = Array.from({ length: Math.min(SPEND_AT_ONCE, count - done) }, () => binding.limit({ key: clientId }));
    expect((await Promise.all(calls)).every(({ success }) => success)).toBe(true);
  }
}

// Calls to the local limiter at once: one at a time, 1,200 of them took longer than a test may.
const SPEND_AT_ONCE = 200;

