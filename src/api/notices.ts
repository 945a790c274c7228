/**
 * The API Worker's side of the deletion notice (contract §5): making the notice, handing it to
 * the queue after the response, and the cron jobs that make sure no recorded notice stays behind.
 */
import { v7 as uuidv7 } from "uuid";
import type { ApiEnv } from "../shared/env.ts";
import { describeError, logLine } from "../shared/log.ts";
import type { DeletionNotice } from "../shared/types.ts";
import { markEnqueued, pendingNotices, purgeDeliveredNotices } from "../storage/notices.ts";

/** The notice of one deletion. Its event_id is new per deletion and kept for every retry. */
export function newDeletionNotice(
  receipt: { receipt_id: string; app_user_id: string; chain_id: string; client_id: string },
  now = new Date(),
): DeletionNotice {
  return {
    // UUIDv7: time-ordered, so outbox rows append to the primary key's b-tree.
    event_id: uuidv7({ msecs: now.getTime() }),
    type: "receipt.deleted",
    occurred_at: now.toISOString(),
    receipt_id: receipt.receipt_id,
    app_user_id: receipt.app_user_id,
    chain_id: receipt.chain_id,
    client_id: receipt.client_id,
  };
}

/**
 * Sends a recorded notice to the queue and marks it enqueued. Runs after the response, so it
 * never throws: a failed send leaves the notice unmarked in the outbox, and the cron job sends
 * it; a failed mark only makes the cron job send a copy, which the notifier recognises.
 */
export async function enqueueNotice(env: Pick<ApiEnv, "DB" | "NOTICES">, notice: DeletionNotice): Promise<void> {
  try {
    await env.NOTICES.send(notice, { contentType: "json" });
  } catch (error) {
    logLine("warn", "notice-enqueue", { event_id: notice.event_id, outcome: "send failed; cron re-sends", cause: describeError(error) });
    return;
  }
  try {
    await markEnqueued(env.DB, [notice.event_id], new Date());
  } catch (error) {
    logLine("warn", "notice-enqueue", { event_id: notice.event_id, outcome: "sent; mark failed", cause: describeError(error) });
  }
}

/** A notice still unsent this long after its deletion was not sent at delete time. */
export const RESEND_GRACE_MS = 30_000;

/**
 * A notice enqueued this long ago and still undelivered has lost its queue copy (the notifier
 * retries for about an hour before dead-lettering, see src/notifier/retry.ts), so it is sent again.
 */
export const LOST_AFTER_MS = 3 * 60 * 60 * 1000;

// sendBatch takes at most 100 messages; ten batches a minute is far above the rate of failed sends.
const RESEND_PAGE = 100;
const RESEND_PAGES_PER_RUN = 10;

/** Cron job: sends every notice the outbox holds unsent after the grace period, or lost. */
export async function resendPendingNotices(env: ApiEnv, now: Date): Promise<Record<string, number>> {
  let resent = 0;
  for (let page = 0; page < RESEND_PAGES_PER_RUN; page += 1) {
    const notices = await pendingNotices(env.DB, {
      unsentBefore: new Date(now.getTime() - RESEND_GRACE_MS),
      lostBefore: new Date(now.getTime() - LOST_AFTER_MS),
      limit: RESEND_PAGE,
    });
    if (notices.length === 0) break;
    await env.NOTICES.sendBatch(
      notices.map(({ payload }) => ({ body: JSON.parse(payload) as DeletionNotice, contentType: "json" as const })),
    );
    await markEnqueued(env.DB, notices.map(({ event_id }) => event_id), now);
    resent += notices.length;
    if (notices.length < RESEND_PAGE) break;
  }
  return { resent };
}

/**
 * Delivered notices are kept 14 days, the longest retention a queue allows: until then a stray
 * copy can still arrive and must be recognised as delivered.
 */
export const DELIVERED_RETENTION_MS = 14 * 24 * 60 * 60 * 1000;

const PURGE_PAGE = 1000;

/** Cron job: deletes delivered notices past their retention, a bounded page per run. */
export async function purgeDelivered(env: ApiEnv, now: Date): Promise<Record<string, number>> {
  const purged = await purgeDeliveredNotices(env.DB, new Date(now.getTime() - DELIVERED_RETENTION_MS), PURGE_PAGE);
  return { purged };
}
