/**
 * What each Worker may touch: its bindings and settings, declared by hand rather than generated
 * so that one file says it. Kept apart from types.ts because the operator scripts, which run on
 * Node, share those types but not the Workers runtime's.
 */
import type { ApiSettings, NotifierSettings } from "./config.ts";
import type { QueuedNotice } from "./types.ts";

/**
 * The shards: receipts, idempotency keys, the notice outbox and failed notices, one D1 database
 * each, bound as `DB_<NAME>` (src/storage/shards.ts finds them).
 */
export type ShardBindings = { [binding: `DB_${string}`]: D1Database };

/** Bindings and settings of the API Worker (see wrangler.toml). */
export interface ApiEnv extends ApiSettings, ShardBindings {
  /** Shard states, written by operators (`npm run shards`) and by the fill check. */
  SHARD_STATES: KVNamespace;
  /** Client records, written only by operators (`npm run clients`). */
  CLIENTS: KVNamespace;
  /** Producer side of the notices queue: receipt.created and receipt.deleted events. */
  NOTICES: Queue<QueuedNotice>;
  /** Slows down repeated failed logins for one client_id. */
  LOGIN_LIMITER: RateLimit;
  /** The erasure's Workflow (src/api/workflows/erasure.ts), started by `npm run app-users -- erase`. */
  ERASURE: Workflow<{ app_user_id: string }>;
}

/** Bindings and settings of the notifier Worker (see src/notifier/wrangler.toml). */
export interface NotifierEnv extends NotifierSettings, ShardBindings {
  /** Producer side of the dead-letter queue, for notices that retrying cannot fix. */
  FAILED_NOTICES: Queue<QueuedNotice>;
}
