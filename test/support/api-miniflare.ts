/**
 * The API Worker as `wrangler deploy` builds it, run by Miniflare from Node on a throwaway local
 * state that the operator scripts (`--persist-to`) reach too: for the tests whose subject runs
 * on Node (an operator script, the app side's example) and talks to the real Worker.
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { Miniflare, convertV4MiniflareOptions } from "miniflare";
import { unstable_getMiniflareWorkerOptions } from "wrangler";
import { localStoreIds } from "../../scripts/lib/local-state.ts";
import { newTokenKey } from "../../src/shared/token-keys.ts";
import { TEST_AUDIT_HASH_KEY } from "./keys.ts";
import { migrateLocalShards } from "./local-d1.ts";
import { ROOT } from "./run-script.ts";

const API_CONFIG = path.join(ROOT, "wrangler.jsonc");

/** What a test may choose of the Worker it starts beyond the defaults. */
export interface ApiWorkerOptions {
  /** Its shards, binding → database_id; one shard (DB_S1) unless given. */
  shards?: Record<string, string>;
  /** Vars over wrangler.jsonc's, such as SHARD_STATES_SECONDS. */
  settings?: Record<string, string>;
}

/**
 * Builds the API Worker, migrates the shards of `state` and starts the Worker on it, with a fresh
 * key set and no client cache, so the next request sees what a script just wrote.
 */
export function startApiWorker(state: string, options: ApiWorkerOptions = {}): Miniflare {
  return new Miniflare(convertV4MiniflareOptions({ ...apiWorker(state, options), resourcePersistencePath: persistencePath(state) }));
}

/**
 * Isolates of the API Worker on `state`, one for each of `options`, in one runtime: each Worker
 * its own isolate, with no memory in common, and every D1 database and KV namespace shared, as
 * the isolates of a deployment share Cloudflare's (one D1 primary runs each database's batches
 * one at a time). Isolate `i` is the Worker named `api-<i>`. The Workflows run in the first alone.
 */
export function startApiIsolates(state: string, options: readonly ApiWorkerOptions[]): Miniflare {
  return new Miniflare(
    convertV4MiniflareOptions({
      resourcePersistencePath: persistencePath(state),
      workers: options.map((each, index) => {
        const { workflows, ...worker } = apiWorker(state, each);
        return { ...worker, name: `api-${index}`, ...(index === 0 && { workflows }) };
      }),
    }),
  );
}

// Where `wrangler --persist-to <state>` keeps local resources.
function persistencePath(state: string): string {
  return path.join(state, "v3");
}

// The Worker as `wrangler deploy` builds it, once a test file: the build is the same for every
// state, and each took a wrangler run of seconds.
let builtDir: string | undefined;
function built(): string {
  if (builtDir === undefined) {
    const outdir = mkdtempSync(path.join(tmpdir(), "receipts-api-build-"));
    const build = spawnSync("wrangler", ["deploy", "--dry-run", "--outdir", outdir], { cwd: ROOT, encoding: "utf8" });
    if (build.status !== 0) throw new Error(`build failed: ${build.stderr}`);
    builtDir = outdir;
  }
  return builtDir;
}

// The states whose shards are migrated.
const migrated = new Set<string>();

// The Worker's own options, from wrangler.jsonc, on `state` (its shards migrated once).
function apiWorker(state: string, options: ApiWorkerOptions) {
  const outdir = built();
  if (!migrated.has(state)) {
    // Made before the Worker starts, so that nothing else holds the files.
    migrateLocalShards(state);
    migrated.add(state);
  }
  // Miniflare 5 takes a new option shape; the v4 one still says plainly what the Worker gets.
  return {
    modules: true as const,
    scriptPath: path.join(outdir, "index.js"),
    modulesRoot: outdir,
    compatibilityDate: "2026-10-20",
    // KV and D1 keyed as wrangler keys them locally, so that `wrangler kv|d1 --local` and the
    // operator commands reach them.
    kvNamespaces: localStoreIds(API_CONFIG).kvNamespaces,
    // One shard is enough for what these tests do.
    d1Databases: options.shards ?? { DB_S1: localStoreIds(API_CONFIG).d1Databases.DB_S1! },
    queueProducers: { NOTICES: "receipts-v2-notices" },
    // A delete of a receipt D1 does not hold looks in the archive.
    r2Buckets: { ARCHIVE: "receipts-v2-archive" },
    // The Workflows of wrangler.jsonc: the app client's export and erasure jobs run on them.
    workflows: deployedOptions().workflows as Record<string, { name: string; className: string }>,
    // The vars as wrangler.jsonc deploys them, so a setting added there reaches this Worker too.
    bindings: {
      ...deployedVars(),
      TOKEN_KEYS: JSON.stringify({ keys: [newTokenKey()] }),
      // A secret, so not among the vars; the Worker refuses to start a request without it.
      AUDIT_HASH_KEY: TEST_AUDIT_HASH_KEY,
      CLIENT_CACHE_SECONDS: "0",
      SHARD_STATES_SECONDS: "0",
      ...options.settings,
    },
    // Every limit of wrangler.jsonc: failed logins, and each route's per client and tier.
    ratelimits: deployedOptions().ratelimits as Record<string, { namespace_id: string; simple: { limit: number; period: 10 | 60 } }>,
  };
}

/** The API Worker's `vars` of wrangler.jsonc, as wrangler hands them to Miniflare. */
function deployedVars(): Record<string, string> {
  // Wrangler's options type loses its field types to an index signature; these are vars.
  return deployedOptions().bindings as Record<string, string>;
}

/** The API Worker's options from wrangler.jsonc, as wrangler hands them to Miniflare. */
function deployedOptions() {
  return unstable_getMiniflareWorkerOptions(API_CONFIG).workerOptions;
}
