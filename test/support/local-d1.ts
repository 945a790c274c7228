/**
 * The shards of a throwaway local state (wrangler's --persist-to), as the operator-script tests
 * set them up and look into them: through wrangler, as an operator's shell would.
 */
import { spawn, spawnSync } from "node:child_process";
import path from "node:path";
import { Miniflare, convertV4MiniflareOptions } from "miniflare";
import { unstable_getMiniflareWorkerOptions } from "wrangler";
import type { RunOnShard } from "../../scripts/lib/audit-command.ts";
import type { StatesOf } from "../../scripts/lib/shard-commands.ts";
import { shardBinding, shardStateKey, type ShardState } from "../../src/shared/shard-ids.ts";
import { runBatch } from "../../src/storage/statement.ts";
import { ROOT } from "./run-script.ts";

/** The D1 databases of wrangler.toml's two shards. */
export const LOCAL_SHARDS = ["s1", "s2"] as const;

/**
 * Applies the migrations to both shards of a local state, one after the other: two wrangler
 * runs on one local state lock each other out. Asynchronous, so a test's hook timeout holds.
 */
export async function migrateLocalShards(state: string): Promise<void> {
  for (const shard of LOCAL_SHARDS) {
    const status = await new Promise<number | null>((resolve) => {
      const child = spawn("wrangler", ["d1", "migrations", "apply", `receipts-v2-${shard}`, "--local", "--persist-to", state], { cwd: ROOT, stdio: "ignore" });
      child.on("close", resolve);
    });
    if (status !== 0) throw new Error(`migrations of ${shard} failed (exit ${status})`);
  }
}

/** Runs SQL on a shard of a local state; returns the last statement's rows. */
export function localD1(state: string, shard: string, sql: string): Record<string, unknown>[] {
  const result = spawnSync("wrangler", ["d1", "execute", `receipts-v2-${shard}`, "--local", "--persist-to", state, "--json", "--command", sql], {
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
        const text = await (await namespace()).get(shardStateKey(shard.name), "text");
        if (text !== null) states.set(shard.name, JSON.parse(text) as ShardState);
      }
      return states;
    },
    async write(name, record) {
      await (await namespace()).put(shardStateKey(name), JSON.stringify(record));
    },
  });
  return { mf, run, shardStates };
}
