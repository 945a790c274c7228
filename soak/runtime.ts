/**
 * The soak's runtime: one Miniflare driven from Node, running the API Worker and the notifier as
 * `npm run build` made them, each inside a wrapper Worker that can fail its storage calls
 * (soak/workers), with the bindings of their own wrangler configs, every shard migrated, and the
 * notifier pushing to the soak's receiver. Only settings differ from a deployment: the timers are
 * shortened through the Workers' own vars (SOAK_VARS). Storage lives in a directory of its own, so
 * that a restart of the runtime keeps it, and is removed on dispose.
 */
import { createWriteStream, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { Miniflare, convertV4MiniflareOptions, type MiniflareOptions } from "miniflare";
import { unstable_getMiniflareWorkerOptions } from "wrangler";
import { API_CONFIG, LOOPBACK, NOTIFIER_CONFIG, applyMigrations, bundled, issueAppClient, issueClient, type HarnessClient } from "../harness/miniflare.ts";
import { buildDeployed, bundleHarnessWorker } from "../harness/build.ts";
import { freePort } from "../harness/ports.ts";
import { PROJECT_ROOT } from "../scripts/lib/wrangler.ts";
import { readShards } from "../scripts/lib/shards.ts";
import { newAuditHashKey } from "../src/shared/audit-hash-key.ts";
import { MIN_FEED_SETTLE_SECONDS } from "../src/shared/config.ts";
import { shardNamed, shardStateKey, type ShardBase, type ShardState } from "../src/shared/shard-ids.ts";
import { ratePolicy } from "../src/shared/rate-limits.ts";
import { newTokenKey } from "../src/shared/token-keys.ts";
import type { Statement } from "../src/storage/statement.ts";
import { DEPLOYED_MODULE, FAULTS_PATH, INJECTED_MARK, SQL_PATH, TRANSIENT_D1_MESSAGE, type BindingFaults, type InjectedCalls, type SqlResult } from "./protocol.ts";

/** The Workers the soak wraps. */
export type WrappedWorker = "api" | "notifier";

/** Built scripts: the deployed Workers and their wrappers. */
export type SoakBundles = Record<WrappedWorker, { deployed: string; wrapper: string }>;

/**
 * The vars the soak sets over the wrangler configs' values: every timer the pipeline waits on,
 * made short enough that faults play out and drain within minutes.
 */
export const SOAK_VARS = {
  api: {
    // A closed or reopened shard is seen within a second.
    SHARD_STATES_SECONDS: "1",
    NOTICE_RESEND_GRACE_SECONDS: "3",
    // Longer than a live copy's queue retries (SOAK_MAX_RETRIES, 1 s doubling to 2 s) take.
    NOTICE_LOST_AFTER_SECONDS: "30",
    // Every receipt is due at the archive's next run (soak/archive.ts).
    ARCHIVE_AFTER_DAYS: "0",
    // The feed's hold-back and an export's wait for adds in flight (10 s deployed): the shortest
    // the service allows, so that an export during the load holds the next restart off briefly.
    FEED_SETTLE_SECONDS: String(MIN_FEED_SETTLE_SECONDS),
  },
  notifier: {
    // The claim on a notice is three times this.
    PUSH_TIMEOUT_SECONDS: "2",
    RETRY_FIRST_DELAY_SECONDS: "1",
    RETRY_MAX_DELAY_SECONDS: "2",
    // 90 s (72 hours deployed): longer than any outage of the plan, as 72 hours is meant to be
    // longer than the outages a push service has.
    NOTICE_RETRY_HOURS: String(90 / 3600),
    // One probe a second while the push service is down (20 s deployed).
    PUSH_PROBE_SECONDS: "1",
  },
} as const;

/**
 * The notices queue's `max_retries` in the soak, as in src/notifier/wrangler.jsonc. The queue
 * retries only what a D1 failure left unrecorded: with 1 s doubling to 2 s they outlast the
 * plan's D1 faults of the notifier, so only the refusals for good become dead letters.
 */
export const SOAK_MAX_RETRIES = 10;

/**
 * The soak's limit on add for a client of the standard tier, where the flooding client is: 30 per
 * 10 s, so that the flood meets it on a busy laptop (which served it about 8 adds a second); the
 * tills are granted the large tier, whose limits stay as deployed, far above what a till sends.
 * Every other limit is as deployed.
 */
export const SOAK_ADD_LIMIT = { quota: 30, windowSeconds: 10 } as const;

/** The tier the soak's tills are granted (`npm run clients -- tier`). */
export const SOAK_TILL_TIER = "large";

type RateLimits = Record<string, { namespace_id: string; simple: { limit: number; period: 10 | 60 } }>;

// wrangler.jsonc's limits, with the standard tier's on add lowered to SOAK_ADD_LIMIT.
function soakLimits(configured: unknown): RateLimits {
  const limits = { ...(configured as RateLimits) };
  const binding = ratePolicy("add", "standard").binding;
  limits[binding] = { ...limits[binding]!, simple: { limit: SOAK_ADD_LIMIT.quota, period: SOAK_ADD_LIMIT.windowSeconds } };
  return limits;
}


/** A shard as the soak addresses it. */
/** A shard of the soak's runtime, as every part of the service knows one. */
export type SoakShard = ShardBase;

type R2 = Awaited<ReturnType<Miniflare["getR2Bucket"]>>;

export interface SoakRuntime {
  /** The API Worker's address; the same across restarts. */
  apiUrl: string;
  /** The directory every store of the runtime persists to (D1, R2, KV, the Workflows). */
  stateDir: string;
  shards: SoakShard[];
  /** Issues a POS client for one chain, on the tier given (the standard one when none is). */
  issueClient(clientId: string, chainId: string, tier?: "large" | "xlarge"): Promise<HarnessClient>;
  /** Issues the app push service's client, which reads the event feed. */
  issueAppClient(clientId: string): Promise<{ clientId: string; secret: string }>;
  /** Runs the API Worker's scheduled handler once, as the cron trigger would. */
  runCron(): Promise<void>;
  setFaults(worker: WrappedWorker, faults: BindingFaults): Promise<void>;
  /** The calls each wrapper failed since the runtime started, across restarts. */
  injected(): Promise<Record<WrappedWorker, InjectedCalls>>;
  setShardState(name: string, state: ShardState["state"]): Promise<void>;
  /** Stops workerd with everything in flight and starts it again on the same storage. */
  restart(): Promise<void>;
  /** Runs statements as one batch on the shard bound as `binding`, as deployed (SQL_PATH). */
  sql(binding: string, statements: readonly Statement[]): Promise<SqlResult[]>;
  /** The archive's bucket (`ARCHIVE`), as the API Worker sees it. */
  archive(): Promise<R2>;
  recentProblems(): string[];
  dispose(): Promise<void>;
}

const KEPT_PROBLEMS = 20;
// Log lines of the failures the soak causes: its own D1 and queue failures, and the notifier's
// retries of the receiver's bad answers.
const INJECTED_MESSAGES = [INJECTED_MARK, TRANSIENT_D1_MESSAGE, "from the push service", "network: "];

/** Builds both Workers as `npm run build` does, and their wrappers, into dist/soak. */
export function buildSoakBundles(): SoakBundles {
  const deployed = buildDeployed();
  const outdir = path.join(PROJECT_ROOT, "dist/soak");
  return {
    api: { deployed: deployed.api, wrapper: bundleHarnessWorker("soak/workers/faulty-api.ts", outdir) },
    notifier: { deployed: deployed.notifier, wrapper: bundleHarnessWorker("soak/workers/faulty-notifier.ts", outdir) },
  };
}

/** Starts both wrapped Workers on fresh storage, pushing to `pushUrl` signed with `pushSecret`. */
export async function startSoakRuntime(bundles: SoakBundles, pushUrl: string, pushSecret: string, logFile?: string): Promise<SoakRuntime> {
  // Every line the Workers log, kept whole for the run's post-mortem (`--log`).
  const log = logFile === undefined ? undefined : createWriteStream(logFile);
  const storage = mkdtempSync(path.join(tmpdir(), "receipts-soak-"));
  // The API keeps its port across restarts, so that the POS clients need not be told of a new one.
  const apiPort = await freePort();
  const api = unstable_getMiniflareWorkerOptions(API_CONFIG).workerOptions;
  const notifier = unstable_getMiniflareWorkerOptions(NOTIFIER_CONFIG).workerOptions;
  const problems: string[] = [];
  const options: MiniflareOptions = convertV4MiniflareOptions({
    host: LOOPBACK,
    port: 0,
    resourcePersistencePath: storage,
    // Traces on, as `observability` deploys them and `npm start` keeps them locally: the trace
    // store (spans with each binding call's keys, and the log lines) persists beside the other
    // stores, where the erasure scans read it.
    unsafeObservability: true,
    handleStructuredLogs: ({ level, message }) => {
      log?.write(`${message}\n`);
      // The failures the soak injects itself would crowd out the ones that explain a problem.
      if ((level !== "warn" && level !== "error") || INJECTED_MESSAGES.some((text) => message.includes(text))) return;
      problems.push(message);
      if (problems.length > KEPT_PROBLEMS) problems.shift();
    },
    workers: [
      {
        ...wrapped(api, "api", bundles.api),
        ratelimits: soakLimits(api.ratelimits),
        bindings: {
          ...(api.bindings as Record<string, string>),
          ...SOAK_VARS.api,
          TOKEN_KEYS: JSON.stringify({ keys: [newTokenKey()] }),
          AUDIT_HASH_KEY: newAuditHashKey(),
        },
        // The harness drives the scheduled handler itself, on a short period.
        cronTriggers: [],
        unsafeDirectSockets: [{ host: LOOPBACK, port: apiPort }],
      },
      {
        ...wrapped(notifier, "notifier", bundles.notifier),
        bindings: {
          ...(notifier.bindings as Record<string, string>),
          ...SOAK_VARS.notifier,
          APP_PUSH_URL: pushUrl,
          APP_PUSH_SECRET: pushSecret,
        },
        queueConsumers: Object.fromEntries(
          Object.entries(notifier.queueConsumers as Record<string, { deadLetterQueue?: string }>).map(([queue, consumer]) => [
            queue,
            consumer.deadLetterQueue ? { ...consumer, maxRetries: SOAK_MAX_RETRIES } : consumer,
          ]),
        ),
      },
    ],
  });
  let mf = new Miniflare(options);
  await mf.ready;
  const shards = readShards(API_CONFIG).map(({ name }) => shardNamed(name));
  // Before the first cron run of readyForLoad, which would otherwise log every job's missing table.
  for (const { binding } of shards) await applyMigrations(await mf.getD1Database(binding, "api"));
  await readyForLoad(mf);

  const totals: Record<WrappedWorker, InjectedCalls> = { api: {}, notifier: {} };
  const injectedNow = async () => {
    const now = { api: {}, notifier: {} } as Record<WrappedWorker, InjectedCalls>;
    for (const worker of ["api", "notifier"] as const) {
      const response = await (await mf.getWorker(worker)).fetch(`http://soak${FAULTS_PATH}`);
      now[worker] = (await response.json()) as InjectedCalls;
    }
    return now;
  };
  return {
    apiUrl: `http://${LOOPBACK}:${apiPort}`,
    stateDir: storage,
    shards,
    issueClient: async (clientId, chainId, tier) => issueClient(await mf.getKVNamespace("CLIENTS", "api"), clientId, chainId, tier),
    issueAppClient: async (clientId) => issueAppClient(await mf.getKVNamespace("CLIENTS", "api"), clientId),
    async runCron() {
      await (await mf.getWorker("api")).scheduled({ scheduledTime: new Date(), cron: "* * * * *" });
    },
    async setFaults(worker, faults) {
      const response = await (await mf.getWorker(worker)).fetch(`http://soak${FAULTS_PATH}`, {
        method: "POST",
        body: JSON.stringify(faults),
      });
      await response.arrayBuffer();
    },
    async injected() {
      const now = await injectedNow();
      return { api: sum(totals.api, now.api), notifier: sum(totals.notifier, now.notifier) };
    },
    async setShardState(name, state) {
      const record: ShardState = { state, changed_at: new Date().toISOString(), by: "operator" };
      await (await mf.getKVNamespace("SHARD_STATES", "api")).put(shardStateKey(name), JSON.stringify(record));
    },
    async restart() {
      // A restart forgets what the wrappers counted: keep it first.
      const now = await injectedNow();
      for (const worker of ["api", "notifier"] as const) totals[worker] = sum(totals[worker], now[worker]);
      await mf.dispose();
      mf = new Miniflare(options);
      await readyForLoad(mf);
    },
    async sql(binding, statements) {
      const response = await (await mf.getWorker("api")).fetch(`http://soak${SQL_PATH}`, {
        method: "POST",
        body: JSON.stringify({ binding, statements }),
      });
      if (!response.ok) throw new Error(`soak SQL on ${binding}: ${response.status} ${await response.text()}`);
      return (await response.json()) as SqlResult[];
    },
    archive: () => mf.getR2Bucket("ARCHIVE", "api"),
    recentProblems: () => [...problems],
    async dispose() {
      await mf.dispose();
      log?.end();
      rmSync(storage, { recursive: true, force: true });
    },
  };
}

/**
 * Waits for the runtime, then makes the first call of every binding method the load uses. Miniflare
 * makes a proxy's first property read and a method's first call synchronously, blocking Node's
 * thread until workerd answers. Made mid-load (the first shard close), such a call blocked it while
 * workerd, logging every event, filled the pipe of its output that only this thread reads: each
 * then waited for the other for good. Right after a start that pipe is empty.
 */
async function readyForLoad(mf: Miniflare): Promise<void> {
  await mf.ready;
  const [api, notifier, states] = await Promise.all([
    mf.getWorker("api"),
    mf.getWorker("notifier"),
    mf.getKVNamespace("SHARD_STATES", "api"),
  ]);
  await Promise.all([
    ...[api, notifier].map(async (worker) => (await worker.fetch(`http://soak${FAULTS_PATH}`)).arrayBuffer()),
    api.scheduled({ scheduledTime: new Date(), cron: "* * * * *" }),
    // A key no shard has: the API Worker reads only `shard:<name>` keys.
    states.put("soak:ready", "1"),
  ]);
}

// A wrapper Worker with the deployed bundle beside it under the name the wrapper imports.
function wrapped(options: Parameters<typeof bundled>[0], name: WrappedWorker, scripts: { deployed: string; wrapper: string }) {
  const { scriptPath: _script, modulesRoot: _root, ...rest } = bundled(options, name, scripts.wrapper);
  const root = path.dirname(scripts.wrapper);
  return {
    ...rest,
    modulesRoot: root,
    modules: [
      { type: "ESModule" as const, path: scripts.wrapper, contents: readFileSync(scripts.wrapper, "utf8") },
      { type: "ESModule" as const, path: path.join(root, DEPLOYED_MODULE), contents: readFileSync(scripts.deployed, "utf8") },
    ],
  };
}

function sum(a: InjectedCalls, b: InjectedCalls): InjectedCalls {
  const total = { ...a };
  for (const [label, count] of Object.entries(b)) total[label] = (total[label] ?? 0) + count;
  return total;
}
