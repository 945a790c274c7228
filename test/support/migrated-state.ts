/**
 * globalSetup of the node projects: migrates the shards of one throwaway local state once, for
 * every test file that needs migrated shards to copy (`migrateLocalShards`). In this process,
 * through the local state the operator commands open (scripts/lib/local-state.ts), recording each
 * migration in `d1_migrations` as `wrangler d1 migrations apply` does: a wrangler run took about
 * 6 s of CPU a shard, and every test waited for it. The wrangler path itself is what
 * test/scripts/shards-migrate.test.ts runs.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { readD1Migrations } from "@cloudflare/vitest-plugin";
import type { TestProject } from "vitest/node";
import { closeLocalStates, localState } from "../../scripts/lib/local-state.ts";
import { readShards } from "../../scripts/lib/shards.ts";
import { statement } from "../../src/storage/statement.ts";
import { ROOT } from "./run-script.ts";

// The node and node-alone projects share one template: vitest runs each project's globalSetup in
// turn before any test starts, and a second migration delayed every test by its seconds.
const TEMPLATE = Symbol.for("receipts-v2.migratedState");

// wrangler's own record of the migrations a database has (`wrangler d1 migrations list` reads it).
const MIGRATIONS_TABLE = `CREATE TABLE IF NOT EXISTS d1_migrations(
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  name TEXT UNIQUE,
  applied_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP NOT NULL
)`;

export default async function migrateOnce(project: TestProject): Promise<() => void> {
  const shared = globalThis as { [TEMPLATE]?: Promise<string> };
  const template = await (shared[TEMPLATE] ??= migratedTemplate());
  project.provide("migratedState", template);
  return () => rmSync(template, { recursive: true, force: true });
}

async function migratedTemplate(): Promise<string> {
  const template = mkdtempSync(path.join(tmpdir(), "receipts-migrated-"));
  const config = path.join(ROOT, "wrangler.jsonc");
  const migrations = await readD1Migrations(path.join(ROOT, "migrations"));
  const state = localState({ remote: false, persistTo: template }, config);
  // Each migration in a batch of its own, as wrangler applies them.
  for (const shard of readShards(config)) {
    await state.batch(shard, [statement(MIGRATIONS_TABLE)]);
    for (const { name, queries } of migrations) {
      await state.batch(shard, [...queries.map((sql) => statement(sql)), statement("INSERT INTO d1_migrations (name) VALUES (?1)", name)]);
    }
  }
  await closeLocalStates();
  return template;
}
