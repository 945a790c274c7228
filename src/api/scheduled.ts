/**
 * The API Worker's every-minute sweeps (wrangler.jsonc): the jobs below run on every shard, each
 * run on its own, so that one that fails, or a shard that fails, is logged and stops no other.
 *
 * D1 allows 1,000 queries per Worker invocation, and a sweep of a few hundred shards in the cron
 * invocation alone would pass it. So the cron tick only hands the shards out, a bounded group per
 * message of the SWEEPS queue, and each consumer invocation sweeps at most SWEEP_QUERY_BUDGET
 * queries' worth of shards (docs/scale.md §6 says why a queue and not a Workflow).
 */
import type { ApiEnv } from "../shared/env.ts";
import { describeError, logLine } from "../shared/log.ts";
import type { NoticeMessage, QueuedNotice, SweepMessage } from "../shared/types.ts";
import { SWEEP_TOMBSTONE_QUERIES, purgeOldTombstones, sweepTombstones } from "../storage/archive/deletion.ts";
import { PURGED_TOMBSTONE_KEPT_MS } from "../storage/archive/tombstones.ts";
import { purgeExpiredAudit } from "../storage/audit.ts";
import { purgeExpiredJobs } from "../storage/export.ts";
import { FENCE_KEPT_MS, purgeFences } from "../storage/fences.ts";
import {
  endpointState,
  markEnqueued,
  pendingEvents,
  probeCandidates,
  purgeDelivered as purgeDeliveredEvents,
  type OutboxEvent,
} from "../storage/outbox/operations.ts";
import { deleteExpiredIdempotencyKeys } from "../storage/receipts.ts";
import { MAX_ROUNDS, deleteInRounds } from "../storage/rounds.ts";
import { shardsOf, type Shard } from "../storage/shards.ts";
import { DELIVERED_RETENTION_MS, apiConfig, type ApiConfig } from "../shared/config.ts";
import { dailyArchiveId } from "./workflows/archive-workflow.ts";
import { jobShardsOf, startOnce } from "./workflows/durable.ts";

/**
 * The most D1 queries one invocation of the sweeps may issue: half of Cloudflare's 1,000 per
 * invocation, leaving room for a job whose query count grows before its declared maximum does.
 */
export const SWEEP_QUERY_BUDGET = 500;

/** A maintenance job run on every shard on every cron tick; returns what it did, for the log line. */
interface ScheduledJob {
  run: (env: ApiEnv, shard: Shard, now: Date, config: ApiConfig) => Promise<Record<string, number>>;
  /** The most D1 queries one run on one shard issues: what the sweeps' budget is planned with. */
  maxQueries: number;
}

/**
 * Events a page of the re-send reads and hands over: after an outage a shard's backlog goes out
 * RESEND_PAGE × RESEND_PAGES_PER_RUN (50,000) events a minute, in 21 D1 queries, packed
 * EVENTS_PER_MESSAGE to a message (docs/reliability.md#the-drain-after-72-hours has the figures).
 */
const RESEND_PAGE = 5_000;
const RESEND_PAGES_PER_RUN = 10;

/**
 * Events per message of the hand-over: a queue takes 5,000 messages a second, and a 72-hour
 * backlog one message per event would take it most of an hour to carry at 10,000 stores. Ten: a
 * notifier batch of 100 messages stays 1,000 pushes (an invocation's subrequests).
 */
export const EVENTS_PER_MESSAGE = 10;

// A sendBatch call takes at most 100 messages and 256 KB in all; kept under, with room for metadata.
const SEND_BATCH_MESSAGES = 100;
const SEND_BATCH_BYTES = 200_000;

const JOBS: Record<string, ScheduledJob> = {
  "idempotency-keys.delete-expired": {
    run: async (_env, shard, now) => ({ deleted: await deleteExpiredIdempotencyKeys(shard.db, now) }),
    maxQueries: MAX_ROUNDS,
  },
  "notices.resend": {
    run: (env, shard, now, config) => resendPendingNotices(env, shard, now, config),
    // Reads the shard's copy of the push service's state; then each page reads the pending events
    // and marks them enqueued.
    maxQueries: 1 + RESEND_PAGES_PER_RUN * 2,
  },
  "notices.purge-delivered": { run: purgeDelivered, maxQueries: 1 },
  "audit.purge-expired": {
    run: async (_env, shard, now, config) => {
      const cutoff = new Date(now.getTime() - config.auditRetentionMs);
      return { purged: await deleteInRounds(shard.db, (rows) => purgeExpiredAudit(cutoff, rows)) };
    },
    maxQueries: MAX_ROUNDS,
  },
  "archive-tombstones.purge-lines": {
    run: async (env, shard, now) => ({ purged: await sweepTombstones(shard.db, env.ARCHIVE, now) }),
    maxQueries: SWEEP_TOMBSTONE_QUERIES,
  },
  "archive-tombstones.purge-old": {
    run: async (_env, shard, now) => ({
      purged: await purgeOldTombstones(shard.db, new Date(now.getTime() - PURGED_TOMBSTONE_KEPT_MS), PURGE_PAGE),
    }),
    maxQueries: 1,
  },
  // Its records live on the first shard alone (docs/api.md#jobs).
  "app-user-jobs.purge-expired": {
    run: async (env, shard, now, config): Promise<Record<string, number>> => {
      if (shard.name !== shardsOf(env)[0]?.name) return {};
      const [first] = jobShardsOf(env);
      return { purged: await purgeExpiredJobs(first!, env.ARCHIVE, new Date(now.getTime() - config.exportKeptMs)) };
    },
    maxQueries: 2,
  },
  "erasure-fences.purge": {
    run: async (_env, shard, now) => {
      const cutoff = new Date(now.getTime() - FENCE_KEPT_MS);
      return { purged: await deleteInRounds(shard.db, (rows) => purgeFences(cutoff, rows)) };
    },
    maxQueries: MAX_ROUNDS,
  },
};

/** The most D1 queries a sweep of one shard (every job once) issues. */
export const SHARD_SWEEP_QUERIES = Object.values(JOBS).reduce((sum, job) => sum + job.maxQueries, 0);

/** How many shards one invocation sweeps at most: as many as the budget covers at their worst. */
export const SHARDS_PER_SWEEP = Math.floor(SWEEP_QUERY_BUDGET / SHARD_SWEEP_QUERIES);

// Queues take at most 100 messages per sendBatch.
const SEND_BATCH_MAX = 100;

/**
 * The cron tick: hands every shard out to the SWEEPS queue, SHARDS_PER_SWEEP to a message, and
 * issues no D1 query itself, so it stays within the limit whatever the number of shards.
 */
export async function dispatchSweeps(env: ApiEnv, now: Date): Promise<void> {
  await sendSweeps(env, shardsOf(env).map(({ name }) => name), now.toISOString());
}

/**
 * The SWEEPS queue's consumer: sweeps the batch's shards in order while they fit in one
 * invocation's budget, and hands the shards left over back to the queue in fresh messages, so
 * that neither a batch of several messages nor a message planned with other constants (an
 * earlier deploy) can take an invocation over SWEEP_QUERY_BUDGET.
 */
export async function consumeSweeps(
  messages: readonly Message<SweepMessage>[],
  env: ApiEnv,
  config = apiConfig(env),
): Promise<void> {
  const known = new Map(shardsOf(env).map((shard) => [shard.name, shard]));
  let room = SHARDS_PER_SWEEP;
  const sweeps: Promise<void>[] = [];
  const leftOver = new Map<string, string[]>();
  for (const { body } of messages) {
    const shards = body.shards.flatMap((name) => {
      const shard = known.get(name);
      // A shard removed from the bindings since the tick: nothing to sweep there any more.
      if (!shard) logLine("warn", "scheduled", { job: "sweep", shard: name, cause: "no such shard binding" });
      return shard ? [shard] : [];
    });
    const now = shards.slice(0, room);
    room -= now.length;
    if (now.length > 0) sweeps.push(runScheduledJobs(env, new Date(body.at), config, now));
    const later = shards.slice(now.length).map(({ name }) => name);
    if (later.length > 0) leftOver.set(body.at, [...(leftOver.get(body.at) ?? []), ...later]);
  }
  await Promise.all([...sweeps, ...[...leftOver].map(([at, names]) => sendSweeps(env, names, at))]);
}

async function sendSweeps(env: Pick<ApiEnv, "SWEEPS">, shardNames: readonly string[], at: string): Promise<void> {
  const messages: MessageSendRequest<SweepMessage>[] = [];
  for (let start = 0; start < shardNames.length; start += SHARDS_PER_SWEEP) {
    messages.push({ body: { shards: shardNames.slice(start, start + SHARDS_PER_SWEEP), at }, contentType: "json" });
  }
  for (let start = 0; start < messages.length; start += SEND_BATCH_MAX) {
    await env.SWEEPS.sendBatch(messages.slice(start, start + SEND_BATCH_MAX));
  }
}

/**
 * Runs every job once on each of `shards` (all of the Worker's unless told), with the settings
 * the Worker parsed (src/api/index.ts); a test may leave them to be parsed from `env`.
 */
export async function runScheduledJobs(
  env: ApiEnv,
  now = new Date(),
  config = apiConfig(env),
  shards: readonly Shard[] = shardsOf(env),
): Promise<void> {
  const runs = shards.flatMap((shard) => Object.entries(JOBS).map(([name, job]) => ({ name, job, shard })));
  await Promise.all(
    runs.map(async ({ name, job, shard }) => {
      try {
        logLine("info", "scheduled", { job: name, shard: shard.name, ...(await job.run(env, shard, now, config)) });
      } catch (error) {
        logLine("error", "scheduled", { job: name, shard: shard.name, cause: describeError(error) });
      }
    }),
  );
}

// While the push service is down, each shard offers this many events a tick for the notifier to
// probe it with; the notifier's probe slot, not this, bounds the pushes.
const PROBE_CANDIDATES_PER_SHARD = 1;

/**
 * Cron job: hands the queue every event of the shard's outbox that is due: unsent after the grace
 * period (NOTICE_RESEND_GRACE_SECONDS); due for its next attempt by its retry schedule
 * (src/notifier/retry.ts); acked unpushed while the push service was down, once a probe found it
 * back (docs/reliability.md#backing-off-as-a-whole); or lost: enqueued that long ago
 * (NOTICE_LOST_AFTER_SECONDS) with no attempt scheduled and still undelivered. While the push
 * service is down it hands over only the oldest due event, a probe candidate.
 */
export async function resendPendingNotices(
  env: Pick<ApiEnv, "NOTICES">,
  shard: Shard,
  now: Date,
  timing: Pick<ApiConfig, "noticeResendGraceMs" | "noticeLostAfterMs">,
): Promise<Record<string, number>> {
  const endpoint = await endpointState(shard.db);
  if (endpoint.downSince !== null) {
    return { probe_candidates: await resend(env, shard, now, await probeCandidates(shard.db, now, PROBE_CANDIDATES_PER_SHARD)) };
  }
  let resent = 0;
  for (let page = 0; page < RESEND_PAGES_PER_RUN; page += 1) {
    const events = await pendingEvents(
      shard.db,
      {
        unsentBefore: new Date(now.getTime() - timing.noticeResendGraceMs),
        lostBefore: new Date(now.getTime() - timing.noticeLostAfterMs),
        upSince: endpoint.upSince,
        limit: RESEND_PAGE,
      },
      now,
    );
    resent += await resend(env, shard, now, events);
    if (events.length < RESEND_PAGE) break;
  }
  return { resent };
}

// Hands the events to the queue, EVENTS_PER_MESSAGE to a message and the sendBatch calls side by
// side, then marks them enqueued: a send that fails marks none, and the next run hands them over again.
async function resend(env: Pick<ApiEnv, "NOTICES">, shard: Shard, now: Date, events: readonly OutboxEvent[]): Promise<number> {
  if (events.length === 0) return 0;
  const messages: { body: NoticeMessage; bytes: number }[] = [];
  for (let start = 0; start < events.length; start += EVENTS_PER_MESSAGE) {
    const group = events.slice(start, start + EVENTS_PER_MESSAGE);
    const notices = group.map(({ payload }) => JSON.parse(payload) as QueuedNotice);
    // The payloads are ASCII (IDs are printable ASCII; no receipt body is in them): a character a byte.
    messages.push({ body: notices.length === 1 ? notices[0]! : { events: notices }, bytes: group.reduce((sum, { payload }) => sum + payload.length + 1, 12) });
  }
  const calls: { bodies: NoticeMessage[]; bytes: number }[] = [];
  for (const { body, bytes } of messages) {
    const last = calls.at(-1);
    if (last && last.bodies.length < SEND_BATCH_MESSAGES && last.bytes + bytes <= SEND_BATCH_BYTES) {
      last.bodies.push(body);
      last.bytes += bytes;
    } else {
      calls.push({ bodies: [body], bytes });
    }
  }
  await Promise.all(calls.map(({ bodies }) => env.NOTICES.sendBatch(bodies.map((body) => ({ body, contentType: "json" as const })))));
  await markEnqueued(shard.db, events.map(({ event_id }) => event_id), now);
  return events.length;
}

export { DELIVERED_RETENTION_MS };

const PURGE_PAGE = 1000;

/** Cron job: deletes the shard's delivered events past their retention, a bounded page per run. */
export async function purgeDelivered(_env: ApiEnv, shard: Shard, now: Date): Promise<Record<string, number>> {
  const purged = await purgeDeliveredEvents(shard.db, new Date(now.getTime() - DELIVERED_RETENTION_MS), PURGE_PAGE);
  return { purged };
}

/**
 * Whether a cron tick starts the day's archive moves: the ticks of 03:00 to 03:04 UTC, a quiet
 * hour in Europe, five of them so that a tick the platform skips costs no day. Only the first
 * start of a day makes an instance; the others find its ID taken.
 */
export function startsArchives(now: Date): boolean {
  return now.getUTCHours() === 3 && now.getUTCMinutes() < 5;
}

/**
 * Starts the day's archive move on every shard (src/api/workflows/archive-workflow.ts), one
 * Workflow instance per shard under the day's ID: a start whose ID is taken, already started
 * today, changes nothing. Issues no D1 query; a shard whose start fails is logged and left to
 * the next tick.
 */
export async function startDailyArchives(env: ApiEnv, now: Date): Promise<void> {
  await Promise.all(
    shardsOf(env).map(async ({ name }) => {
      const id = dailyArchiveId(name, now);
      try {
        if (await startOnce(env.ARCHIVING, id, { shard: name })) logLine("info", "scheduled", { job: "archive.start", shard: name, instance_id: id });
      } catch (error) {
        logLine("error", "scheduled", { job: "archive.start", shard: name, instance_id: id, cause: describeError(error) });
      }
    }),
  );
}
