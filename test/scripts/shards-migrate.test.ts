/**
 * `npm run shards -- migrate` (docs/operations.md "Deploy from zero"): every shard
 * of the configs gets the pending migrations, several at once, a line each; a shard that fails
 * leaves the others migrated, and the same command run again after the fix migrates only it.
 * Runs as an operator runs it, on a throwaway local state and a copy of the configs with a
 * migration of its own beside the project's.
 */
import { copyFileSync, cpSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { closeLocalStates } from "../../scripts/lib/local-state.ts";
import { appliedMigrations } from "../../scripts/lib/shard-commands.ts";
import { withShardBlock } from "../../scripts/lib/shards.ts";
import { localD1, migrateLocalShards } from "../support/local-d1.ts";
import { PROCESSES_MS, ROOT, freshState, runScriptAsync } from "../support/run-script.ts";

const state = freshState();
const configDir = mkdtempSync(path.join(tmpdir(), "receipts-migrate-"));
const API_CONFIG = path.join(configDir, "wrangler.jsonc");
const PROBE = "0099_migrate_probe.sql";
const S3_ID = "00000000-0000-4000-8000-000000000399";

/** SQL on a shard of the copy's configs, which also bind s3. */
const sql = (shard: string, text: string) => localD1(state, shard, text, API_CONFIG);
// Not blocking: this process holds the state open for `sql` meanwhile.
const migrate = (...args: string[]) => runScriptAsync("shards", ["migrate", "--persist-to", state, "--config-dir", configDir, ...args]);

beforeAll(async () => {
  // s1 and s2 migrated as `npm start` leaves them; s3 a new, empty database.
  migrateLocalShards(state);
  cpSync(path.join(ROOT, "migrations"), path.join(configDir, "migrations"), { recursive: true });
  writeFileSync(path.join(configDir, "migrations", PROBE), "CREATE TABLE migrate_probe (id INTEGER PRIMARY KEY) STRICT;\n");
  writeFileSync(API_CONFIG, withShardBlock(readFileSync(path.join(ROOT, "wrangler.jsonc"), "utf8"), { name: "s3", database_id: S3_ID }));
  mkdirSync(path.join(configDir, "src/notifier"), { recursive: true });
  copyFileSync(path.join(ROOT, "src/notifier/wrangler.jsonc"), path.join(configDir, "src/notifier/wrangler.jsonc"));
  // What makes s2 fail part-way: a table in the way of the new migration.
  await sql("s2", "CREATE TABLE migrate_probe (id INTEGER PRIMARY KEY)");
}, 120_000);
afterAll(() => closeLocalStates());

describe("docs/operations.md npm run shards -- migrate", () => {
  it("migrates every shard but the one that fails, says which, and exits 1", async () => {
    const result = await migrate("--parallel", "3");
    expect(result.status, result.stderr).toBe(1);
    const lines = result.stdout.split("\n");
    expect(result.stdout).toContain("Migrating 3 shard(s) (local), 3 at once...");
    expect(lines).toContain(`s1\tapplied ${PROBE}`);
    expect(lines.find((line) => line.startsWith("s2\t"))).toMatch(/^s2\tfailed: .*migrate_probe already exists/);
    // The new shard takes every migration, each named once, in order.
    const every = readdirSync(path.join(configDir, "migrations")).filter((name) => name.endsWith(".sql")).sort();
    expect(lines.find((line) => line.startsWith("s3\t"))).toBe(`s3\tapplied ${every.join(", ")}`);
    expect(result.stdout).toContain("2 shard(s) migrated, 0 up to date, 1 failed.");
    expect(result.stderr).toContain("Shard(s) s2 failed");
    expect(result.stderr).toContain("run the same command again");
    // The failed migration left s2 as it was: not recorded, so the next run applies it.
    expect(await sql("s2", `SELECT COUNT(*) AS n FROM d1_migrations WHERE name = '${PROBE}'`)).toEqual([{ n: 0 }]);
  }, PROCESSES_MS);

  it("run again after the fix: only the shard that failed is migrated, exit 0", async () => {
    await sql("s2", "DROP TABLE migrate_probe");
    const result = await migrate();
    expect(result.status, result.stderr).toBe(0);
    const lines = result.stdout.split("\n");
    expect(lines).toContain("s1\tup to date");
    expect(lines).toContain(`s2\tapplied ${PROBE}`);
    expect(lines).toContain("s3\tup to date");
    expect(result.stdout).toContain("1 shard(s) migrated, 2 up to date, 0 failed.");
    for (const shard of ["s1", "s2", "s3"]) {
      expect(await sql(shard, `SELECT COUNT(*) AS n FROM d1_migrations WHERE name = '${PROBE}'`)).toEqual([{ n: 1 }]);
    }
  }, PROCESSES_MS);

  it("bad arguments: exit 2, nothing run", async () => {
    // Refused before any shard is touched: the three at once.
    const cases = [["--parallel", "0"], ["--parallel", "17"], ["s1"]];
    const results = await Promise.all(cases.map((args) => migrate(...args)));
    for (const [index, args] of cases.entries()) expect(results[index]!.status, args.join(" ")).toBe(2);
  });

  it("reads wrangler's table of applied migrations", () => {
    expect(appliedMigrations("│ 0001_a.sql │ ✅     │\n├──┤\n│ 0002_b.sql │ ✅ │")).toEqual(["0001_a.sql", "0002_b.sql"]);
    expect(appliedMigrations("✅ No migrations to apply!")).toEqual([]);
    // wrangler prints its table again after each migration it applies.
    expect(appliedMigrations("│ 0001_a.sql │ ✅ │\n│ 0001_a.sql │ ✅ │\n│ 0002_b.sql │ ✅ │")).toEqual(["0001_a.sql", "0002_b.sql"]);
  });
});
