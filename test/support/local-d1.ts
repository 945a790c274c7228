/**
 * The shards of a throwaway local state (wrangler's --persist-to), as the operator-script tests
 * set them up and look into them: through wrangler, as an operator's shell would.
 */
import { spawn, spawnSync } from "node:child_process";
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
