/**
 * globalSetup of the node projects: migrates the shards of one throwaway local state once, for
 * every test file that needs migrated shards to copy (`migrateLocalShards`). A `wrangler d1
 * migrations apply` costs about 6 s of CPU a shard; four files paid it twice each.
 */
import { spawn } from "node:child_process";
import { cpSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import type { TestProject } from "vitest/node";
import { LOCAL_SHARDS } from "./local-d1.ts";
import { ROOT } from "./run-script.ts";

// The node and node-alone projects share one template: vitest runs each project's globalSetup in
// turn before any test starts, and a second migration delayed every test by its seconds.
const TEMPLATE = Symbol.for("receipts-v2.migratedState");

export default async function migrateOnce(project: TestProject): Promise<() => void> {
  const shared = globalThis as { [TEMPLATE]?: Promise<string> };
  const template = await (shared[TEMPLATE] ??= migratedTemplate());
  project.provide("migratedState", template);
  return () => rmSync(template, { recursive: true, force: true });
}

async function migratedTemplate(): Promise<string> {
  const template = mkdtempSync(path.join(tmpdir(), "receipts-migrated-"));
  // Each shard in a state of its own, side by side (two wrangler runs on one local state lock
  // each other out), then together: a shard is one SQLite file named by its database_id.
  const apart = await Promise.all(LOCAL_SHARDS.map(migrateAlone));
  for (const state of apart) {
    cpSync(state, template, { recursive: true });
    rmSync(state, { recursive: true, force: true });
  }
  return template;
}

async function migrateAlone(shard: string): Promise<string> {
  const state = mkdtempSync(path.join(tmpdir(), `receipts-migrating-${shard}-`));
  const status = await new Promise<number | null>((resolve) => {
    const child = spawn("wrangler", ["d1", "migrations", "apply", `receipts-v2-${shard}`, "--local", "--persist-to", state], { cwd: ROOT, stdio: "ignore" });
    child.on("close", resolve);
  });
  if (status !== 0) throw new Error(`migrations of ${shard} failed (exit ${status})`);
  return state;
}
