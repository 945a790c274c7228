/**
 * The CI check of new migrations (docs/storage.md "Migrations while the service runs"): a release
 * migrates first and deploys second, so a migration must not take away what the previous commit's
 * code reads. Run as CI runs it, on a throwaway git repository.
 */
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { readdirSync } from "node:fs";
import { removedNames } from "../../scripts/lib/migration-check.ts";
import { EXPECTED_MIGRATION } from "../../src/storage/health.ts";
import { ROOT, runScript } from "../support/run-script.ts";

function git(cwd: string, ...args: string[]): void {
  const result = spawnSync("git", args, { cwd, encoding: "utf8" });
  if (result.status !== 0) throw new Error(result.stderr);
}

/** A repository whose last commit has a receipts table and code that reads its body. */
function repository(): string {
  const root = mkdtempSync(path.join(tmpdir(), "receipts-migration-check-"));
  mkdirSync(path.join(root, "migrations"));
  mkdirSync(path.join(root, "src"));
  writeFileSync(path.join(root, "migrations/0001_receipts.sql"), "CREATE TABLE receipts (receipt_id TEXT PRIMARY KEY, body TEXT, legacy_note TEXT);\n");
  writeFileSync(path.join(root, "src/read.ts"), 'export const READ = "SELECT receipt_id, body FROM receipts WHERE receipt_id = ?1";\n');
  git(root, "init", "-q");
  git(root, "add", ".");
  git(root, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", "first");
  return root;
}

const check = (root: string) => runScript("check-migrations", ["--root", root, "--base", "HEAD"]);

describe("docs/operations.md the migration check refuses what breaks the code running during a release", () => {
  it("a migration that drops a column the previous commit reads fails, naming the column and the file", () => {
    const root = repository();
    writeFileSync(path.join(root, "migrations/0002_drop_body.sql"), "-- bodies move elsewhere\nALTER TABLE receipts DROP COLUMN body;\n");
    const result = check(root);
    expect(result.status, result.stdout).toBe(1);
    expect(result.stderr).toContain("migrations/0002_drop_body.sql: drops column receipts.body");
    expect(result.stderr).toContain("src/read.ts");
  });

  it.each([
    ["renames a column in use", "ALTER TABLE receipts RENAME COLUMN body TO content;", "renames column receipts.body"],
    ["renames a table in use", "ALTER TABLE receipts RENAME TO receipts_old;", "renames table receipts"],
    ["drops a table in use", "DROP TABLE IF EXISTS receipts;", "drops table receipts"],
  ])("a migration that %s fails", (_label, sql, message) => {
    const root = repository();
    writeFileSync(path.join(root, "migrations/0002_change.sql"), `${sql}\n`);
    const result = check(root);
    expect(result.status).toBe(1);
    expect(result.stderr).toContain(message);
  });

  it("a migration that drops a column no code reads, or only adds, passes", () => {
    const root = repository();
    writeFileSync(path.join(root, "migrations/0002_drop_note.sql"), "ALTER TABLE receipts DROP COLUMN legacy_note;\nALTER TABLE receipts ADD COLUMN size INTEGER;\n");
    const result = check(root);
    expect(result.status, result.stderr).toBe(0);
    expect(result.stdout).toContain("1 migration(s) added since HEAD (migrations/0002_drop_note.sql)");
  });

  it("the project's own migrations pass against their previous commits", () => {
    const result = runScript("check-migrations", []);
    expect(result.status, result.stderr).toBe(0);
  });

  it("an unknown base is an error that names --base", () => {
    const result = runScript("check-migrations", ["--root", repository(), "--base", "no-such-ref"]);
    expect(result.status).toBe(1);
    expect(result.stderr).toContain("--base");
  });
});

describe("docs/operations.md what a migration takes away", () => {
  it("a table rebuilt under its own name keeps it; the copy's rename frees only the copy's name", () => {
    const sql = `CREATE TABLE outbox_new (id TEXT PRIMARY KEY);
      INSERT INTO outbox_new SELECT id FROM outbox;
      DROP TABLE outbox; -- the old one
      ALTER TABLE outbox_new RENAME TO outbox;`;
    expect(removedNames(sql)).toEqual([]);
  });

  it("quoted names, comments and case are read as SQLite reads them", () => {
    const sql = `/* DROP TABLE kept; */ alter table "audit_log" drop "app_user"; drop view receipt_adds`;
    expect(removedNames(sql)).toEqual([
      { kind: "column", name: "app_user", table: "audit_log", how: "DROP" },
      { kind: "view", name: "receipt_adds", how: "DROP" },
    ]);
  });
});

describe("docs/operations.md the status knows the newest migration", () => {
  it("EXPECTED_MIGRATION names the newest file of migrations/: a new migration bumps it, so the status shows shards without it as lagging", () => {
    const newest = readdirSync(path.join(ROOT, "migrations")).filter((file) => file.endsWith(".sql")).sort().at(-1);
    expect(EXPECTED_MIGRATION).toBe(newest);
  });
});
