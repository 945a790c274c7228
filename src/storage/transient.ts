/**
 * D1's transient errors, retried where running the call again gives the true answer: every
 * statement this service retries is written so that a second run after a first that committed
 * finds its own work and reports it (docs/api.md#shards, "Faults"). {@link runOnShard} is the one
 * way add and delete send a batch: that retry, and an overloaded shard named, around each.
 */
import { runBatch, type Statement } from "./statement.ts";

// Cloudflare's D1 documentation ("Retry queries") names these as safe to retry.
const TRANSIENT_MESSAGES = [
  "Network connection lost",
  "storage caused object to be reset",
  "reset because its code was updated",
];

const ATTEMPTS = 3;
const BASE_DELAY_MS = 20;

/** A shard as its batches reach it: its name, which an overload's answer names, and its database. */
export interface ShardDb {
  name: string;
  db: D1Database;
}

/**
 * Runs `statements` on `shard` as one batch (one round trip, one transaction) under the one retry
 * policy of add and delete: again after a transient error ({@link retryTransient}), and an
 * overload or busy error as a {@link ShardOverloadedError} ({@link onShard}). Returns each
 * statement's result.
 */
export async function runOnShard(shard: ShardDb, statements: readonly Statement[]): Promise<D1Result[]> {
  return onShard(shard.name, () => retryTransient(() => runBatch(shard.db, statements)));
}

/**
 * Runs `call`, and again after a short, jittered, growing pause while it fails with a transient
 * error, at most three times in all. Only for calls whose repetition is safe (see above).
 */
async function retryTransient<T>(call: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt += 1) {
    try {
      return await call();
    } catch (error) {
      if (attempt >= ATTEMPTS || !isTransientD1Error(error)) throw error;
      await scheduler.wait(BASE_DELAY_MS * 2 ** (attempt - 1) * (0.5 + Math.random()));
    }
  }
}

/** Whether D1 says the call may succeed if made again. */
function isTransientD1Error(error: unknown): boolean {
  const message = String(error instanceof Error ? error.message : error);
  return TRANSIENT_MESSAGES.some((text) => message.includes(text));
}

/**
 * Whether D1 refused a batch because the event it records would have committed more than
 * EVENT_COMMIT_SECONDS after its event_id was made (migration 0018): nothing of the batch is
 * stored, and the change may be made again under fresh IDs (docs/api.md#event-feed, "The tail").
 */
export function isLateEventCommit(error: unknown): boolean {
  return String(error instanceof Error ? error.message : error).includes("event committed more than");
}

// Cloudflare's D1 documentation ("Error list") answers "D1 DB is overloaded. Requests queued for
// too long." or "... Too many requests queued." to a call the database had no time for; SQLite's
// SQLITE_BUSY is a write that found the database locked. Neither ran, and running it again at
// once only lengthens the queue: the caller is told to come back instead.
const OVERLOAD_MESSAGES = ["D1 DB is overloaded", "SQLITE_BUSY"];

/** A shard refused a call as overloaded or busy: nothing of it ran, and the same call later may succeed. */
export class ShardOverloadedError extends Error {
  override name = "ShardOverloadedError";
  /** The shard's name. */
  readonly shard: string;

  constructor(shard: string, error: unknown) {
    super(`shard ${shard} is overloaded: ${error instanceof Error ? error.message : String(error)}`);
    this.shard = shard;
  }
}

/**
 * Runs a call on shard `shard`; D1's overload or busy error becomes a {@link ShardOverloadedError},
 * which the API answers with 503 and Retry-After, not 500 (docs/api.md#shards, "Faults").
 */
async function onShard<T>(shard: string, call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (error) {
    const message = String(error instanceof Error ? error.message : error);
    throw OVERLOAD_MESSAGES.some((text) => message.includes(text)) ? new ShardOverloadedError(shard, error) : error;
  }
}
