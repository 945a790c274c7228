/**
 * The shards of a throwaway local state (wrangler's --persist-to), as the operator-script tests
 * set them up and look into them: through wrangler, as an operator's shell would.
 */
import { spawn, spawnSync } from "node:child_process";
import path from "node:path";
import { Miniflare, convertV4MiniflareOptions } from "miniflare";
import type { RunOnShard } from "../../scripts/lib/audit-command.ts";
import { readShards } from "../../scripts/lib/shards.ts";
import { shardBinding } from "../../src/shared/shard-ids.ts";
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
 * The shards of a local state reached through Miniflare, for an operator script's commands run
 * in-process: the databases `wrangler d1 --persist-to <state>` reaches, without a wrangler start
 * per query. Start it after the last write through wrangler: it does not see a later one.
 */
export function localShardsMiniflare(state: string): { mf: Miniflare; run: RunOnShard } {
  const shards = readShards(path.join(ROOT, "wrangler.toml"));
  const mf = new Miniflare(
    convertV4MiniflareOptions({
      modules: true,
      script: "export default { fetch: () => new Response(null, { status: 404 }) };",
      compatibilityDate: "2026-10-20",
      d1Databases: Object.fromEntries(shards.map((shard) => [shardBinding(shard.name), shard.database_id])),
      resourcePersistencePath: path.join(state, "v3"),
    }),
  );
  const run: RunOnShard = async (_target, shard, statements) => {
    const results = await runBatch(await mf.getD1Database(shardBinding(shard.name)), statements);
    return results.map(({ results: rows }) => rows);
  };
  return { mf, run };
}
