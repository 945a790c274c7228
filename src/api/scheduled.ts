/**
 * The API Worker's cron trigger (wrangler.toml, every minute). Each job is independent: one that
 * fails is logged and does not stop the others.
 */
import type { ApiEnv } from "../shared/env.ts";
import { describeError, logLine } from "../shared/log.ts";
import { deleteExpiredIdempotencyKeys } from "../storage/receipts.ts";
import { purgeDelivered, resendPendingNotices } from "./notices.ts";

/** A maintenance job run on every cron tick; returns what it did, for the log line. */
type ScheduledJob = (env: ApiEnv, now: Date) => Promise<Record<string, number>>;

const JOBS: Record<string, ScheduledJob> = {
  "idempotency-keys.delete-expired": async (env, now) => ({
    deleted: await deleteExpiredIdempotencyKeys(env.DB, now),
  }),
  "notices.resend": resendPendingNotices,
  "notices.purge-delivered": purgeDelivered,
};

/** Runs every job once. */
export async function runScheduledJobs(env: ApiEnv, now = new Date()): Promise<void> {
  await Promise.all(
    Object.entries(JOBS).map(async ([name, job]) => {
      try {
        logLine("info", "scheduled", { job: name, ...(await job(env, now)) });
      } catch (error) {
        logLine("error", "scheduled", { job: name, cause: describeError(error) });
      }
    }),
  );
}
