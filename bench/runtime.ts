/**
 * The bench's runtime: one Miniflare, driven straight from Node (no `wrangler dev` proxy), running
 * the built API and notifier Workers with the bindings of their own wrangler configs, plus the
 * floor and counting Workers with the API Worker's bindings. Storage lives in Miniflare's
 * throwaway directory and is gone when the runtime is disposed.
 */
import { Miniflare, convertV4MiniflareOptions } from "miniflare";
import { unstable_getMiniflareWorkerOptions } from "wrangler";
import { API_CONFIG, LOOPBACK, NOTIFIER_CONFIG, applyMigrations, bundled, issueClient, type HarnessClient } from "../harness/miniflare.ts";
import { readShards } from "../scripts/lib/shards.ts";
import { newAuditHashKey } from "../src/shared/audit-hash-key.ts";
import { stampShardTag } from "../src/shared/shard-ids.ts";
import { newTokenKey } from "../src/shared/token-keys.ts";
import type { Bundles } from "./build.ts";

/** The Workers a bench run talks to, each on its own loopback socket. */
export type WorkerName = "api" | "floor" | "counted";

/** A started runtime and what the bench does with it. */
export interface Runtime {
  /** Base URL of a Worker's own socket, e.g. `http://127.0.0.1:41234`. */
  urls: Record<WorkerName, string>;
  /** Issues a client for one chain, as `npm run clients -- issue` would. */
  issueClient(name: string): Promise<HarnessClient>;
  /** Stores `count` receipts of `client` for `appUserId` and returns their IDs. */
  seedReceipts(client: HarnessClient, appUserId: string, count: number, body: string): Promise<string[]>;
  /** The size of every shard's database together, in bytes, as D1 reports it after a statement. */
  storedBytes(): Promise<number>;
  /** The last warnings and errors the Workers logged, for a failure report. */
  recentProblems(): string[];
  dispose(): Promise<void>;
}

const KEPT_PROBLEMS = 20;

/** Where the notifier pushes, when a run measures deliveries; without it the notifier logs and acks. */
export interface PushTo {
  url: string;
  /** `whsec_` and the key's base64, as APP_PUSH_SECRET takes it. */
  secret: string;
}

/** Starts every Worker, applies the migrations and returns the runtime. */
export async function startRuntime(bundles: Bundles, push?: PushTo): Promise<Runtime> {
  const api = unstable_getMiniflareWorkerOptions(API_CONFIG).workerOptions;
  const notifier = unstable_getMiniflareWorkerOptions(NOTIFIER_CONFIG).workerOptions;
  // Wrangler's options type loses its field types to an index signature; these are vars.
  const apiVars = api.bindings as Record<string, string>;
  // A fresh key set per run: a developer's .dev.vars, which wrangler read above, never counts.
  const apiBindings = { ...apiVars, TOKEN_KEYS: JSON.stringify({ keys: [newTokenKey()] }), AUDIT_HASH_KEY: newAuditHashKey() };
  // No push URL unless asked: the notifier logs and acks each notice, as in plain local development.
  const { APP_PUSH_URL: _pushUrl, ...notifierVars } = notifier.bindings as Record<string, string>;
  const notifierBindings = push ? { ...notifierVars, APP_PUSH_URL: push.url, APP_PUSH_SECRET: push.secret } : notifierVars;
  const apiShaped = (name: WorkerName, scriptPath: string) => ({
    ...bundled(api, name, scriptPath),
    bindings: apiBindings,
    ratelimits: raisedLimits(api.ratelimits),
    // The cron would only add noise; the bench drives HTTP routes.
    cronTriggers: [],
    // Only the API Worker hosts the Workflows (one Workflow name, one class to export)
    // and consumes the cron's sweeps (a queue takes one consumer).
    ...(name === "api" ? {} : { workflows: {}, queueConsumers: {} }),
    unsafeDirectSockets: [{ host: LOOPBACK, port: 0 }],
  });

  const problems: string[] = [];
  const mf = new Miniflare(
    convertV4MiniflareOptions({
      host: LOOPBACK,
      port: 0,
      // Every request writes a log line; keeping them would flood the terminal, but the last
      // warnings and errors explain a failing run.
      handleStructuredLogs: ({ level, message }) => {
        if (level !== "warn" && level !== "error") return;
        problems.push(message);
        if (problems.length > KEPT_PROBLEMS) problems.shift();
      },
      workers: [
        apiShaped("api", bundles.api),
        { ...bundled(notifier, "notifier", bundles.notifier), bindings: notifierBindings },
        apiShaped("floor", bundles.floor),
        apiShaped("counted", bundles.counted),
      ],
    }),
  );
  await mf.ready;

  // Every shard of wrangler.jsonc, migrated; seeded receipts take turns among them.
  const shards = await Promise.all(
    readShards(API_CONFIG).map(async ({ binding, tag }) => ({ tag, db: await mf.getD1Database(binding, "api") })),
  );
  for (const { db } of shards) await applyMigrations(db);
  const kv = await mf.getKVNamespace("CLIENTS", "api");
  const urls = Object.fromEntries(
    await Promise.all(
      (["api", "floor", "counted"] as const).map(async (name) => [name, (await mf.unsafeGetDirectURL(name)).origin]),
    ),
  ) as Record<WorkerName, string>;

  let receiptSerial = 0;
  return {
    urls,
    issueClient: (name) => issueClient(kv, `bench-${name}`, `chain-${name}`),
    async seedReceipts(client, appUserId, count, body) {
      const first = receiptSerial;
      receiptSerial += count;
      const { tag, db } = shards[first % shards.length]!;
      const prefix = receiptIdPrefix(tag);
      // One statement makes every row inside D1: binding thousands of inserts from Node would
      // take longer than the timed runs.
      await db
        .prepare(
          `WITH RECURSIVE n(i) AS (SELECT ?1 UNION ALL SELECT i + 1 FROM n WHERE i < ?2)
           INSERT INTO receipts (receipt_id, chain_id, client_id, app_user_id, body, created_at)
           SELECT ?3 || printf('%012d', i), ?4, ?5, ?6, ?7, ?8 FROM n`,
        )
        .bind(first, first + count - 1, prefix, client.chainId, client.clientId, appUserId, body, new Date().toISOString())
        .run();
      return Array.from({ length: count }, (_, i) => prefix + String(first + i).padStart(12, "0"));
    },
    async storedBytes() {
      const sizes = await Promise.all(shards.map(async ({ db }) => (await db.prepare("SELECT 1").run()).meta.size_after ?? 0));
      return sizes.reduce((sum, size) => sum + size, 0);
    },
    recentProblems: () => [...problems],
    dispose: () => mf.dispose(),
  };
}

/**
 * Seeded receipt IDs have the shape of the service's own (UUIDv7 with the shard's tag), so the
 * API Worker finds them on the shard they were seeded on.
 */
function receiptIdPrefix(tag: number): string {
  return stampShardTag("019a0000-0000-7000-8000-", tag);
}

/**
 * The limits of wrangler.jsonc, each raised far above what one machine can send: the bench's one
 * client times what counting against a limit costs a request, never its 429s. The login limit
 * stays: the bench's logins succeed.
 */
function raisedLimits(limits: unknown): Record<string, { namespace_id: string; simple: { limit: number; period: 10 | 60 } }> {
  const configured = limits as Record<string, { namespace_id: string; simple: { limit: number; period: 10 | 60 } }>;
  return Object.fromEntries(
    Object.entries(configured).map(([name, limit]) => [name, name === "LOGIN_LIMITER" ? limit : { ...limit, simple: { ...limit.simple, limit: RAISED_LIMIT } }]),
  );
}

const RAISED_LIMIT = 1_000_000_000;
