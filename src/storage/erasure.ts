/**
 * Erasure of an app user's data in every shard (docs/api.md#erasure), at one instant: their
 * receipts created at or before it, and with them every copy of their data (Idempotency-Key
 * answers, outbox rows, failed notices, the events of their earlier erasures), an audit record
 * per erased receipt, their audit records pseudonymised, and one `app_user.erased` event.
 *
 * The work is a list of named steps, each one D1 batch (one transaction) on one shard (the archive's
 * pages aside: src/storage/archive/erasure.ts), safe to
 * run again after it committed: the erasure's Workflow (src/api/workflows/erasure-workflow.ts)
 * makes each a durable step, the shards' steps split over child instances, so a run cut off
 * anywhere resumes with the same end state; the soak runs them straight through. No step grows
 * with the app user's data or the number of shards. Adds racing the erasure: a shard's first
 * page first writes the erasure's fence (src/storage/fences.ts), so an add created at or before
 * the instant either committed before it (and the pages sweep it) or finds the fence and stores
 * nothing. This file stays free of Workers types.
 */
import { v7 as uuidv7 } from "uuid";
import { importAuditHashKey, pseudonymWith } from "../shared/audit-hash-key.ts";
import type { AppUserErasedEvent } from "../shared/schemas.ts";
import { stampShardTag, type ShardBase } from "../shared/shard-ids.ts";
import { auditErasure, countErasedBy, erasureEventId, erasureRecorded } from "./audit.ts";
import { eraseArchivedReceipts, type ErasureBucket } from "./archive/erasure.ts";
import { checkFirstLayoutRenamed } from "./archive/legacy.ts";
import { earlierErasureRequests, forgetErasureRequests } from "./erasure-requests.ts";
import { eraseExports } from "./export.ts";
import { writeFence } from "./fences.ts";
import { recordErasedEvent } from "./outbox/statements.ts";
import { earlierErasuresEvents, erasureStatements, type ErasedUser } from "./erasure-statements.ts";
import { statement, type Statement } from "./statement.ts";
import { runAtOnce, type JobShard, type StepRunner } from "./steps.ts";
import { userReceiptsPage } from "./user-receipts.ts";

/** What the `begin` step fixes for the whole erasure, kept for a resume. */
export interface ErasureStart {
  /**
   * The erasure's ID, a UUIDv7 of its start: the request_id of its audit records of receipts,
   * which count what it erased. Its event gets an event_id of its own when it is recorded.
   */
  event_id: string;
  /** The erasure's instant, its event's occurred_at: everything created at or before it goes. */
  occurred_at: string;
}

/**
 * What an erasure did: its Workflow's output, which names the app user nowhere (the instance is
 * kept where no erasure reaches it); the event, app_user_id and all, goes to the queue.
 */
export interface Erasure {
  receipts_erased: number;
  /** Receipts erased per shard name. */
  shards: Record<string, number>;
  /** The erasure's `app_user.erased` event, less its app_user_id. */
  event: Omit<AppUserErasedEvent, "app_user_id">;
}

/** Receipts per page: each page is one short transaction on its shard. */
export const ERASURE_PAGE = 500;

/** How an erasure runs: its steps, its clock, and what hands its event over once recorded. */
export interface ErasureOptions<S extends JobShard = JobShard> {
  steps?: StepRunner;
  now?: () => Date;
  /**
   * Hands the recorded event to the queue, inside the last step: the event goes out when the
   * erasure completes. Without it the cron job sends it after its grace period.
   */
  send?: (event: AppUserErasedEvent, shard: S) => Promise<void>;
  /** The archive's bucket: its objects of the app user are erased too, and counted. */
  archive?: ErasureBucket;
  /** The request (migration 0020) that named the app user: it goes with the event's record. */
  requestId?: string;
  /**
   * Which of the given earlier requests of the app user belong to instances that have ended
   * (and so go with this one's); without it, every earlier request stays.
   */
  endedRequests?: (requestIds: string[]) => Promise<string[]>;
}

/**
 * Erases an app user in every shard, in turn, then records the erasure's event and its own audit
 * record on the first shard (any shard's outbox reaches the notifier; the first is where an
 * operator looks) and hands the event over. Steps: with an archive, `check the archive's layout`
 * (src/storage/archive/legacy.ts); `begin`, `erase <shard> page <n>` for each
 * shard (page 0 also writes the fence), `record and send`. A step that throws throws out of
 * here; run again (or resumed), the erasure erases what is left. The erasure's Workflow runs
 * the same three parts, the middle one split over child instances.
 *
 * @param hashKey AUDIT_HASH_KEY's bytes, which key the hash kept in place of the app_user_id.
 * @example await eraseAppUser("user-42", shards, key) // { receipts_erased: 3, ... }
 */
export async function eraseAppUser<S extends JobShard>(
  appUserId: string,
  shards: readonly S[],
  hashKey: Uint8Array,
  { steps = runAtOnce, now = () => new Date(), send, archive, requestId }: ErasureOptions<S> = {},
): Promise<Erasure> {
  const first = shards[0];
  if (!first) throw new Error("no shards to erase from");
  if (archive) await checkFirstLayoutRenamed(archive, steps);
  const start = await beginErasure(first, steps, now);
  const perShard = await eraseShards(appUserId, start, shards, hashKey, steps);
  if (archive) await eraseArchive(appUserId, start, perShard, shards, hashKey, archive, steps);
  return recordErasure(appUserId, start, perShard, first, hashKey, { steps, send, requestId });
}

/**
 * The `begin` step: fixes the erasure's ID (tagged for the first shard, where its event is
 * recorded) and its instant, once for the whole erasure, whatever runs its shards.
 */
export function beginErasure(first: ShardBase, steps: StepRunner = runAtOnce, now: () => Date = () => new Date()): Promise<ErasureStart> {
  return steps<{ event_id: string; occurred_at: string }>("begin", async () => ({
    event_id: stampShardTag(uuidv7(), first.tag),
    occurred_at: now().toISOString(),
  }));
}

/**
 * The `erase <shard> page <n>` steps of some of the shards, in turn, up to the erasure's
 * instant. Returns the receipts this erasure erased per shard name.
 */
export async function eraseShards(
  appUserId: string,
  start: ErasureStart,
  shards: readonly JobShard[],
  hashKey: Uint8Array,
  steps: StepRunner = runAtOnce,
): Promise<Record<string, number>> {
  const user = await erasedUser(appUserId, start, hashKey);
  const perShard: Record<string, number> = {};
  for (const shard of shards) perShard[shard.name] = await eraseOnShard(shard, user, steps);
  return perShard;
}

/**
 * The archive's pages (src/storage/archive/erasure.ts), after every shard's: a move that read the
 * user's rows before those pages has written its objects by now. Adds the archived receipts
 * erased to `perShard`, the count per shard name.
 */
export async function eraseArchive(
  appUserId: string,
  start: ErasureStart,
  perShard: Record<string, number>,
  shards: readonly JobShard[],
  hashKey: Uint8Array,
  archive: ErasureBucket,
  steps: StepRunner = runAtOnce,
): Promise<void> {
  const user = await erasedUser(appUserId, start, hashKey);
  for (const [name, count] of Object.entries(await eraseArchivedReceipts(archive, user, shards, steps))) {
    perShard[name] = (perShard[name] ?? 0) + count;
  }
  await eraseExports(shards[0]!, archive, user.pseudonym, steps);
}

/**
 * The `record and send` step, once every shard is erased: the erasure's event and its own audit
 * record on the first shard (both once, however often the step runs, also when the erasure
 * erased nothing), and the event handed over. The step's result is the event_id alone. Returns
 * what the erasure did.
 */
export async function recordErasure<S extends JobShard>(
  appUserId: string,
  start: ErasureStart,
  perShard: Record<string, number>,
  first: S,
  hashKey: Uint8Array,
  { steps = runAtOnce, send, requestId, endedRequests }: Pick<ErasureOptions<S>, "steps" | "send" | "requestId" | "endedRequests"> = {},
): Promise<Erasure> {
  const user = await erasedUser(appUserId, start, hashKey);
  const receipts = Object.values(perShard).reduce((sum, count) => sum + count, 0);
  const eventWithId = (event_id: string): AppUserErasedEvent => ({
    event_id,
    type: "app_user.erased",
    occurred_at: user.occurred_at,
    app_user_id: appUserId,
    receipts,
  });
  // The event_id is made here, just before its commit, never at `begin`: an event must commit
  // within seconds of its ID's time for the event feed to hand it to a reader who follows `next`
  // (docs/api.md#event-feed, "The tail"), and the erasure may have taken minutes since. A run
  // again after a commit makes another ID, records nothing, and sends the one recorded. The
  // request that named the app user goes in the same batch, and so do the user's earlier
  // erasures' events delivered or dead-lettered between the pages and this commit; from this
  // commit on the notifier keeps none (earlierErasuresEvents).
  const { event_id } = await steps("record and send", async () => {
    const fresh = eventWithId(stampShardTag(uuidv7(), first.tag));
    const forget = requestId === undefined ? [] : [forgetErasureRequests(requestId, await endedEarlier(first, requestId, endedRequests))];
    const [, , recorded] = await first.run([
      recordErasedEvent(fresh, `NOT ${erasureRecorded("?5", "?6")}`, user.pseudonym, user.occurred_at),
      auditErasure(user.occurred_at, user.pseudonym, fresh.event_id),
      erasureEventId(user.occurred_at, user.pseudonym),
      ...earlierErasuresEvents(user, ERASURE_PAGE),
      ...forget,
    ]);
    const event = eventWithId((recorded![0] as { event_id: string }).event_id);
    await send?.(event, first);
    return { event_id: event.event_id };
  });
  const { app_user_id: _named, ...unnamed } = eventWithId(event_id);
  return { receipts_erased: receipts, shards: perShard, event: unnamed };
}

async function endedEarlier(first: JobShard, requestId: string, ended: ErasureOptions["endedRequests"]): Promise<string[]> {
  if (!ended) return [];
  const [rows] = (await first.run([earlierErasureRequests(requestId)])) as [{ request_id: string }[]];
  return rows.length === 0 ? [] : ended(rows.map((row) => row.request_id));
}

/**
 * The keyed hash kept in audit records in place of an erased app_user_id (see
 * src/shared/audit-hash-key.ts `pseudonymWith`).
 */
export async function pseudonym(appUserId: string, hashKey: Uint8Array): Promise<string> {
  return pseudonymWith(await importAuditHashKey(hashKey), appUserId);
}

async function erasedUser(appUserId: string, start: ErasureStart, hashKey: Uint8Array): Promise<ErasedUser> {
  return { id: appUserId, pseudonym: await pseudonym(appUserId, hashKey), event_id: start.event_id, occurred_at: start.occurred_at };
}

/**
 * Erases the app user on one shard, a page a step: a page of their receipts and a page of what
 * their deleted receipts and earlier erasures left behind. Done when no statement of a page was
 * cut short by its page size. Returns how many receipts this erasure erased there, counted from
 * its audit records, so that a page run again after it committed still counts once.
 */
async function eraseOnShard(shard: JobShard, user: ErasedUser, steps: StepRunner): Promise<number> {
  for (let page = 0; ; page += 1) {
    const { erased, done } = await steps(`erase ${shard.name} page ${page}`, async () => {
      const work = [...(page === 0 ? [writeFence(user.pseudonym, user.occurred_at)] : []), ...receiptPage(user), ...leftoverPage(user)];
      const rows = await shard.run([...work, countErasedBy(user.pseudonym, user.event_id)]);
      const count = (rows.at(-1)![0] as { n: number }).n;
      return { erased: count, done: rows.slice(0, -1).every((returned) => returned.length < ERASURE_PAGE) };
    });
    if (done) return erased;
  }
}

/**
 * One page of the app user's receipts created at or before the instant, erased in every table
 * of the map of personal data that holds a copy of them (src/storage/erasure-statements.ts): audit
 * records, then their copies, then the receipts, so that even statement by statement a stop
 * leaves every receipt it has not reached with its copies, for the next run. The page is the same
 * set in every statement (receipts change only in the last), and the last returns the receipts it
 * erased. Idempotency-Key records stay, in erased form, so that a till's retry replays.
 */
function receiptPage(user: ErasedUser): Statement[] {
  const receipts = statement(
    userReceiptsPage("receipt_id", "?3"),
    user.id,
    user.occurred_at,
    ERASURE_PAGE,
  );
  return erasureStatements("receiptPage", { user, receipts });
}

/**
 * One page of what the app user's receipts created at or before the instant and deleted earlier
 * left behind (found through their audit records, under either name; a receipt created after the
 * instant is the app user's anew, and so are its events and key record), of the events of their
 * earlier erasures (which name them), of their audit records, which get the pseudonym, and of the
 * purged tombstones that name them: every table of the map that holds such leftovers. Each
 * statement returns what it changed.
 */
function leftoverPage(user: ErasedUser): Statement[] {
  return erasureStatements("leftoverPage", { user, limit: ERASURE_PAGE });
}
