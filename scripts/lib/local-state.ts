/**
 * The local state of `npm start` opened in the operator command's own process, once: one
 * Miniflare over the config's shards, KV namespaces and R2 buckets, persisted where `wrangler dev`
 * and `wrangler d1|kv|r2 --local --persist-to` keep them (`<state>/v3/d1`, `<state>/v3/kv`,
 * `<state>/v3/r2`, keyed by the IDs and bucket names of the config), so that a command and
 * `npm start` read what the other wrote. A wrangler
 * start per call cost seconds each; this costs one Miniflare start (about a second) a command.
 * `runCli` closes it when the command ends.
 */
import path from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import type { Miniflare } from "miniflare";
import { runBatch, type Statement } from "../../src/storage/statement.ts";
import { atCommandEnd } from "./cli.ts";
import { readConfigFile } from "./config.ts";
import { readShards, type ConfigShard } from "./shards.ts";
import { PROJECT_ROOT, type Target } from "./wrangler.ts";

/** One statement's result in a batch: its rows and D1's meta. */
export interface BatchResult<Row> {
  results: Row[];
  meta: Record<string, unknown>;
}
/** A KV namespace of the local state, as Miniflare hands it to Node. */
export type LocalNamespace = Awaited<ReturnType<Miniflare["getKVNamespace"]>>;
/** An R2 bucket of the local state, as Miniflare hands it to Node. */
export type LocalBucket = Awaited<ReturnType<Miniflare["getR2Bucket"]>>;

/** A local state's shards and namespaces, reached in-process. */
export interface LocalState {
  /** Runs statements on a shard as one batch; returns each statement's rows and meta (D1's `size_after` among them). */
  batch<Row>(shard: ConfigShard, statements: readonly Statement[], options?: Locking): Promise<BatchResult<Row>[]>;
  /** A call on a KV namespace of the config, made again while the state is locked (see {@link Locking}). */
  kv<T>(binding: string, call: (namespace: LocalNamespace) => Promise<T>, options?: Locking): Promise<T>;
  /** A call on an R2 bucket of the config, made again while the state is locked. */
  r2<T>(binding: string, call: (bucket: LocalBucket) => Promise<T>, options?: Locking): Promise<T>;
}

/**
 * Two commands on one local state, or a command beside `npm start`, can find its SQLite files
 * locked by the other's runtime ({@link isLocalStateBusy}): such a call is made again after a
 * short pause, for up to {@link BUSY_WAIT_MS} in all, unless `retryLocked` is false (a write
 * whose timing decides a race).
 */
export interface Locking {
  retryLocked?: boolean;
}

/** Thrown for a local state whose shards have no tables: the one line a newcomer needs. */
export class NoLocalState extends Error {}

const open = new Map<string, Promise<Miniflare>>();

/**
 * The local state a command acts on: `--persist-to`'s directory, else `.wrangler/state` beside
 * the config (as wrangler resolves them), with the shards and KV namespaces that `config` binds.
 * Opened at the first call of a process and shared by the later ones.
 */
export function localState(target: Target, config: string): LocalState {
  const persist = target.persistTo ? path.resolve(PROJECT_ROOT, target.persistTo) : path.join(path.dirname(config), ".wrangler", "state");
  const key = `${persist}\n${config}`;
  let runtime = open.get(key);
  if (!runtime) {
    const v4Options = {
      modules: true,
      script: "export default {}",
      resourcePersistencePath: path.join(persist, "v3"),
      ...localStoreIds(config),
      // The runtime runs no code of ours: what it logs is a failed start, which its error carries.
      handleStructuredLogs: () => undefined,
    };
    // The runtime opens the state's files as it starts, and can find them locked like any call.
    runtime = whileLocked(async () => {
      // Loaded at the first call alone: a command that ends before one (bad arguments, --help)
      // no longer pays its load.
      const { Miniflare, convertV4MiniflareOptions } = await import("miniflare");
      const mf = new Miniflare(convertV4MiniflareOptions(v4Options));
      try {
        await mf.ready;
        return mf;
      } catch (error) {
        await mf.dispose().catch(() => undefined);
        throw error;
      }
    }, {});
    // A start that failed fails the first call on it; it must not end the process before that.
    runtime.catch(() => undefined);
    open.set(key, runtime);
    atCommandEnd(closeLocalStates);
  }
  const started = runtime;
  return {
    async batch<Row>(shard: ConfigShard, statements: readonly Statement[], options: Locking = {}) {
      try {
        return (await whileLocked(async () => runBatch(await (await started).getD1Database(shard.binding), statements), options)) as BatchResult<Row>[];
      } catch (error) {
        throw withoutTables(error, persist, target);
      }
    },
    kv: async (binding, call, options = {}) => whileLocked(async () => call(await (await started).getKVNamespace(binding)), options),
    r2: async (binding, call, options = {}) => whileLocked(async () => call(await (await started).getR2Bucket(binding)), options),
  };
}

/** Closes every local state this process opened; the next call opens it again. */
export async function closeLocalStates(): Promise<void> {
  const runtimes = [...open.values()];
  open.clear();
  await Promise.all(runtimes.map(async (runtime) => (await runtime.catch(() => undefined))?.dispose()));
}

/**
 * The error a call on a shard failed with, or, when the shard has no tables, what to run first:
 * a command before the first `npm start` would otherwise print D1's "no such table" per shard.
 */
function withoutTables(error: unknown, persist: string, target: Target): unknown {
  if (!/no such table/i.test((error as Error).message)) return error;
  const flag = target.persistTo ? ` --persist-to ${target.persistTo}` : "";
  return new NoLocalState(
    `No local state yet in ${target.persistTo ?? path.relative(PROJECT_ROOT, persist)}: ` +
      `run \`npm start${flag ? ` --${flag}` : ""}\` (or \`npm run shards -- migrate${flag}\`) first.`,
  );
}

/**
 * Whether a call on the local state failed because another runtime (`npm start`'s, another
 * command's) held its SQLite files at that moment, so that nothing of the call was stored and
 * the same call a moment later can succeed:
 * - D1's `SQLITE_BUSY`, which names the lock;
 * - the local KV's bare 500 (`KV GET failed: 500 Internal Server Error`), its answer to a call
 *   that found its file locked, and to nothing else;
 * - the local D1's `Failed to get session commit token: internal error; reference = …`: its
 *   Durable Object reads the bookmark inside the batch's transaction, which the error rolls back;
 * - workerd's `internal error; reference = …`, its whole word on a storage failure of the local
 *   D1's object (a commit that found the file locked), which therefore did not commit either.
 * Beside `npm start` with adds flowing, the last two met one command in four; anything else is a
 * real failure and is not retried.
 */
export function isLocalStateBusy(error: unknown): boolean {
  const message = String(error instanceof Error ? error.message : error);
  return BUSY.some((pattern) => pattern.test(message));
}

const BUSY = [/SQLITE_BUSY/, /^KV [A-Z]+ failed: 500/, /Failed to get session commit token/, /(?:^|: )internal error; reference\s*=/];

/**
 * How long a call waits out a busy local state before it fails: far longer than any one write
 * of `npm start` or another command holds the files, short enough that a state held for good
 * (a hung process) is named while the operator still waits.
 */
export const BUSY_WAIT_MS = 30_000;
const BUSY_PAUSE_MS = 250;
const BUSY_PAUSE_MAX_MS = 2_000;

/** A call that found the local state busy until {@link BUSY_WAIT_MS} had passed: the message names the cause. */
export class LocalStateBusy extends Error {}

/**
 * Runs `call`, and again after a growing, jittered pause while it fails because the local state is
 * busy ({@link isLocalStateBusy}), for up to `waitMs`; past that a {@link LocalStateBusy} names the
 * last cause and what to do. A call with `retryLocked: false` is made once.
 */
export async function whileLocked<T>(call: () => Promise<T>, { retryLocked = true }: Locking, waitMs = BUSY_WAIT_MS): Promise<T> {
  const deadline = Date.now() + waitMs;
  for (let attempt = 1; ; attempt += 1) {
    try {
      return await call();
    } catch (error) {
      if (!retryLocked || !isLocalStateBusy(error)) throw error;
      const pause = Math.min(BUSY_PAUSE_MS * attempt, BUSY_PAUSE_MAX_MS) * (0.5 + Math.random());
      if (Date.now() + pause > deadline) {
        throw new LocalStateBusy(
          `The local state stayed busy for ${Math.round(waitMs / 1000)} s, held by npm start or another command beside this one ` +
            `(${attempt} tries; the last: ${(error as Error).message}). Nothing of the failed call was stored; run the command again.`,
        );
      }
      await sleep(pause);
    }
  }
}

/**
 * The stores a config binds, binding → the ID wrangler keys their local storage by: a D1
 * database's `database_id` and a KV namespace's `id`, or, in a config that carries none (the
 * committed ones), the binding itself, as wrangler dev and `wrangler d1|kv --local` do; an R2
 * bucket's `bucket_name`. Whatever runs beside `npm start` on its state takes them from here.
 */
export function localStoreIds(config: string): { d1Databases: Record<string, string>; kvNamespaces: Record<string, string>; r2Buckets: Record<string, string> } {
  const parsed = readConfigFile(config);
  const ids = (table: string, idField: string, fallback: boolean) => {
    const entries = parsed[table];
    const ids: Record<string, string> = {};
    for (const entry of Array.isArray(entries) ? (entries as Record<string, unknown>[]) : []) {
      const { binding, [idField]: id } = entry;
      if (typeof binding !== "string") continue;
      if (typeof id === "string") ids[binding] = id;
      else if (fallback) ids[binding] = binding;
    }
    return ids;
  };
  return {
    d1Databases: Object.fromEntries(readShards(config).map((shard) => [shard.binding, shard.database_id ?? shard.binding])),
    kvNamespaces: ids("kv_namespaces", "id", true),
    r2Buckets: ids("r2_buckets", "bucket_name", false),
  };
}
