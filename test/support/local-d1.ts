/**
 * The shards of a throwaway local state (wrangler's --persist-to), as the operator-script tests
 * set them up and look into them: through wrangler, as an operator's shell would.
 */
import { spawnSync } from "node:child_process";
import { cpSync } from "node:fs";
import path from "node:path";
import { Miniflare, convertV4MiniflareOptions } from "miniflare";
import { inject } from "vitest";
import { unstable_getMiniflareWorkerOptions } from "wrangler";
import type { RunOnShard } from "../../scripts/lib/audit-command.ts";
import type { StatesOf } from "../../scripts/lib/shard-commands.ts";
import { shardBinding, shardStateKey, type ShardState } from "../../src/shared/shard-ids.ts";
import { runBatch } from "../../src/storage/statement.ts";
import { ROOT } from "./run-script.ts";

/** The D1 databases of wrangler.toml's two shards. */
export const LOCAL_SHARDS = ["s1", "s2"] as const;

declare module "vitest" {
  interface ProvidedContext {
    /** In the "node" project: a local state whose shards are migrated, for a test file to copy. */
    migratedState: string;
  }
}

/**
 * Gives a fresh local state both shards, migrated: a copy of the ones the node project's global
 * setup migrated once (test/support/migrated-state.ts), as `wrangler d1 migrations apply` leaves
 * them.
 */
export function migrateLocalShards(state: string): void {
  cpSync(inject("migratedState"), state, { recursive: true });
}

/** Runs SQL on a shard of a local state (bound by `config`, the project's by default); returns the last statement's rows. */
export function localD1(state: string, shard: string, sql: string, config?: string): Record<string, unknown>[] {
  const configFlags = config === undefined ? [] : ["-c", config];
  const result = spawnSync("wrangler", ["d1", "execute", `receipts-v2-${shard}`, "--local", "--persist-to", state, "--json", "--command", sql, ...configFlags], {
    cwd: ROOT,
    encoding: "utf8",
  });
  if (result.status !== 0) throw new Error(result.stderr);
  return (JSON.parse(result.stdout) as { results: Record<string, unknown>[] }[]).at(-1)!.results;
}

/**
 * A local state's shards and KV namespaces reached through Miniflare, for an operator script's
 * commands run in-process: the databases and namespaces `wrangler --persist-to <state>` reaches
 * (bound by wrangler.toml's IDs), without a wrangler start per call. Start it after the last
 * write through wrangler: it does not see a record another process replaces later.
 */
export function localStateMiniflare(state: string): { mf: Miniflare; run: RunOnShard; shardStates: StatesOf } {
  const { d1Databases, kvNamespaces } = unstable_getMiniflareWorkerOptions(path.join(ROOT, "wrangler.toml")).workerOptions as {
    d1Databases: Record<string, string>;
    kvNamespaces: Record<string, string>;
  };
  const mf = new Miniflare(
    convertV4MiniflareOptions({
      modules: true,
      script: "export default { fetch: () => new Response(null, { status: 404 }) };",
      compatibilityDate: "2026-10-20",
      d1Databases,
      kvNamespaces,
      resourcePersistencePath: path.join(state, "v3"),
    }),
  );
  const run: RunOnShard = async (_target, shard, statements) => {
    const results = await runBatch(await mf.getD1Database(shardBinding(shard.name)), statements);
    return results.map(({ results: rows }) => rows);
  };
  const namespace = () => mf.getKVNamespace("SHARD_STATES");
  const shardStates: StatesOf = () => ({
    async read(shards) {
      const states = new Map<string, ShardState>();
      for (const shard of shards) {
        const text = await onLiveSocket(async () => (await namespace()).get(shardStateKey(shard.name), "text"));
        if (text !== null) states.set(shard.name, JSON.parse(text) as ShardState);
      }
      return states;
    },
    async write(name, record) {
      await onLiveSocket(async () => (await namespace()).put(shardStateKey(name), JSON.stringify(record)));
    },
  });
  return { mf, run, shardStates };
}

/**
 * A KV call to the in-process Miniflare, made once more if its connection turned out closed. An
 * operator command run in-process blocks this process while it runs wrangler (spawnSync): for half
 * a minute on a busy machine, in which workerd closes the idle connection Node keeps to it, and
 * the next call on it fails with UND_ERR_SOCKET (measured: a 30 s block does it). A read made
 * again reads the same; a put made again writes the same value.
 */
async function onLiveSocket<T>(call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (error) {
    if ((error as { cause?: { code?: string } }).cause?.code !== "UND_ERR_SOCKET") throw error;
    return call();
  }
}
