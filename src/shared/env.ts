/**
 * What each Worker may touch. The bindings come from the types `npm run types` generates from
 * each Worker's wrangler.jsonc (worker-configuration.d.ts and notifier-configuration.d.ts at the
 * repository's root), so that a binding renamed or dropped there fails the typecheck; this file adds only what the configs
 * cannot say: the shards beyond the two placeholders, each queue's message, and the settings as
 * src/shared/config.ts reads them. Kept apart from types.ts because the operator scripts, which
 * run on Node, share those types but not the Workers runtime's.
 */
import type { ApiSettings, NotifierSettings } from "./config.ts";
import type { ErasureParams, NoticeMessage, QueuedNotice, SweepMessage } from "./types.ts";

/**
 * The shards: receipts, idempotency keys, the notice outbox and failed notices, one D1 database
 * each, bound as `DB_<NAME>` (src/storage/shards.ts finds them). wrangler.jsonc holds two; local
 * and later shards are found by name.
 */
export type ShardBindings = { [binding: `DB_${string}`]: D1Database };

// What a Worker's generated bindings leave to this file: the shards, the queues (generated
// untyped), and the vars, which config.ts types together with the secrets.
type Generated<Bindings, Settings, Queues extends string> = Omit<Bindings, `DB_${string}` | Queues | keyof Settings>;

/** Bindings and settings of the API Worker (see wrangler.jsonc). */
export interface ApiEnv extends ApiSettings, ShardBindings, Generated<ApiBindings, ApiSettings, "NOTICES" | "SWEEPS" | "ERASURE" | "EXPORT" | "ARCHIVING" | "METRICS"> {
  /** Producer side of the notices queue: receipt.created and receipt.deleted events, one or a bundle a message. */
  NOTICES: Queue<NoticeMessage>;
  /** The cron's sweeps, a group of shards per message, consumed by this Worker (api/scheduled.ts). */
  SWEEPS: Queue<SweepMessage>;
  /**
   * The erasure's Workflow (src/api/workflows/erasure-workflow.ts), started by `npm run app-users
   * -- erase`, and by an erasure for each of its parts.
   */
  ERASURE: Workflow<ErasureParams>;
  /** The export of an app user's data (src/api/workflows/export-workflow.ts), started by the app's client and by `npm run app-users -- export`. */
  EXPORT: Workflow<{ request_id: string }>;
  /** The archive's move (src/api/workflows/archive-workflow.ts), started daily by the cron and by `npm run archive -- run`. */
  ARCHIVING: Workflow<{ shard: string; part?: number }>;
  /** A data point per request (src/shared/metrics.ts); absent from a test's bare env, which then writes none. */
  METRICS?: AnalyticsEngineDataset;
}

/** Bindings and settings of the notifier Worker (see src/notifier/wrangler.jsonc). */
export interface NotifierEnv extends NotifierSettings, ShardBindings, Generated<NotifierBindings, NotifierSettings, "NOTICES" | "FAILED_NOTICES" | "METRICS"> {
  /** Producer side of the notices queue, for the events of a bundle that met its retries. */
  NOTICES: Queue<QueuedNotice>;
  /** Producer side of the dead-letter queue, for notices that retrying cannot fix. */
  FAILED_NOTICES: Queue<QueuedNotice>;
  /** A data point per push attempt (src/shared/metrics.ts); absent from a test's bare env, which then writes none. */
  METRICS?: AnalyticsEngineDataset;
}
