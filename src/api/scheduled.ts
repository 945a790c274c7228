/**
 * The API Worker's cron trigger (wrangler.toml, every minute). Every job runs on every shard,
 * each run on its own: one that fails, or a shard that fails, is logged and stops no other.
 */
import type { ApiEnv } from "../shared/env.ts";
import { describeError, logLine } from "../shared/log.ts";
import type { QueuedNotice } from "../shared/types.ts";
import { purgeExpiredAudit } from "../storage/audit.ts";
import { FENCE_KEPT_MS, purgeFences } from "../storage/fences.ts";
import { markEnqueued, pendingEvents, purgeDelivered as purgeDeliveredEvents } from "../storage/outbox/operations.ts";
import { deleteExpiredIdempotencyKeys } from "../storage/receipts.ts";
import { deleteInRounds } from "../storage/rounds.ts";
import { shardsOf, type Shard } from "../storage/shards.ts";
import { apiConfig, type ApiConfig } from "../shared/config.ts";

/** A maintenance job run on every shard on every cron tick; returns what it did, for the log line. */
type ScheduledJob = (env: ApiEnv, shard: Shard, now: Date, config: ApiConfig) => Promise<Record<string, number>>;

const JOBS: Record<string, ScheduledJob> = {
  "idempotency-keys.delete-expired": async (_env, shard, now) => ({
    deleted: await deleteExpiredIdempotencyKeys(shard.db, now),
  }),
  "notices.resend": (env, shard, now, config) => resendPendingNotices(env, shard, now, config),
  "notices.purge-delivered": purgeDelivered,
  "audit.purge-expired": async (_env, shard, now, config) => {
    const cutoff = new Date(now.getTime() - config.auditRetentionMs);
    return { purged: await deleteInRounds(shard.db, (rows) => purgeExpiredAudit(cutoff, rows)) };
  },
  "erasure-fences.purge": async (_env, shard, now) => {
    const cutoff = new Date(now.getTime() - FENCE_KEPT_MS);
    return { purged: await deleteInRounds(shard.db, (rows) => purgeFences(cutoff, rows)) };
  },
};

/**
 * Runs every job once on every shard, with the settings the Worker parsed (src/api/index.ts);
 * a test may leave them to be parsed from `env`.
 */
export async function runScheduledJobs(env: ApiEnv, now = new Date(), config = apiConfig(env)): Promise<void> {
  const runs = shardsOf(env).flatMap((shard) => Object.entries(JOBS).map(([name, job]) => ({ name, job, shard })));
  await Promise.all(
    runs.map(async ({ name, job, shard }) => {
      try {
        logLine("info", "scheduled", { job: name, shard: shard.name, ...(await job(env, shard, now, config)) });
      } catch (error) {
        logLine("error", "scheduled", { job: name, shard: shard.name, cause: describeError(error) });
      }
    }),
  );
}

// sendBatch takes at most 100 messages; ten batches a minute is far above the rate of failed sends.
const RESEND_PAGE = 100;
const RESEND_PAGES_PER_RUN = 10;

/**
 * Cron job: sends every event the shard's outbox holds unsent after the grace period
 * (NOTICE_RESEND_GRACE_SECONDS), or lost: enqueued that long ago (NOTICE_LOST_AFTER_SECONDS) and
 * still undelivered, although the notifier's retries of a live copy end well before.
 */
export async function resendPendingNotices(
  env: Pick<ApiEnv, "NOTICES">,
  shard: Shard,
  now: Date,
  timing: Pick<ApiConfig, "noticeResendGraceMs" | "noticeLostAfterMs">,
): Promise<Record<string, number>> {
  let resent = 0;
  for (let page = 0; page < RESEND_PAGES_PER_RUN; page += 1) {
    const events = await pendingEvents(shard.db, {
      unsentBefore: new Date(now.getTime() - timing.noticeResendGraceMs),
      lostBefore: new Date(now.getTime() - timing.noticeLostAfterMs),
      limit: RESEND_PAGE,
    });
    if (events.length === 0) break;
    await env.NOTICES.sendBatch(
      events.map(({ payload }) => ({ body: JSON.parse(payload) as QueuedNotice, contentType: "json" as const })),
    );
    await markEnqueued(shard.db, events.map(({ event_id }) => event_id), now);
    resent += events.length;
    if (events.length < RESEND_PAGE) break;
  }
  return { resent };
}

/**
 * Delivered events are kept 14 days, the longest retention a queue allows: until then a stray
 * copy can still arrive and must be recognised as delivered.
 */
export const DELIVERED_RETENTION_MS = 14 * 24 * 60 * 60 * 1000;

const PURGE_PAGE = 1000;

/** Cron job: deletes the shard's delivered events past their retention, a bounded page per run. */
export async function purgeDelivered(_env: ApiEnv, shard: Shard, now: Date): Promise<Record<string, number>> {
  const purged = await purgeDeliveredEvents(shard.db, new Date(now.getTime() - DELIVERED_RETENTION_MS), PURGE_PAGE);
  return { purged };
}
