/**
 * docs/api.md#erasure, docs/operations.md "A shopper asks to be forgotten": `npm run app-users --
 * erase` itself, through wrangler, on the two shards of a throwaway local state. The erasure's
 * own rules on three shards are in test/storage/erasure.test.ts.
 */
import { beforeAll, describe, expect, it } from "vitest";
import { newAuditHashKey, parseAuditHashKey } from "../../src/shared/audit-hash-key.ts";
import { pseudonym } from "../../src/storage/erasure.ts";
import { sqlLiteral } from "../../src/storage/statement.ts";
import { shardTag, stampShardTag } from "../../src/shared/shard-ids.ts";
import { LOCAL_SHARDS, localD1, migrateLocalShards } from "../support/local-d1.ts";
import { freshState, runScript } from "../support/run-script.ts";

const state = freshState();
const KEY = newAuditHashKey();
/** `app-users <command> --persist-to <state> <args>`: the state flag before any `--` that args hold. */
const appUsers = ([command, ...args]: string[], env: Record<string, string | undefined> = { AUDIT_HASH_KEY: KEY }) =>
  runScript("app-users", command === undefined ? [] : [command, "--persist-to", state, ...args], undefined, env);

let serial = 0;
/** Puts one receipt of an app user on each shard, with IDs that name the shard. */
function seed(appUserId: string): void {
  for (const shard of LOCAL_SHARDS) {
    serial += 1;
    const id = stampShardTag(`019aa8a4-3c1e-7000-8000-${String(serial).padStart(12, "0")}`, shardTag(shard));
    localD1(state, shard, `INSERT INTO receipts (receipt_id, chain_id, client_id, app_user_id, body, created_at)
      VALUES ('${id}', 'chain-1', 'pos-1', ${sqlLiteral(appUserId)}, '{}', '2026-11-22T10:00:00.000Z')`);
  }
}

/** Every app_user_id the receipts hold, on both shards, with its count. */
function holders(): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const shard of LOCAL_SHARDS) {
    for (const { app_user_id } of localD1(state, shard, "SELECT app_user_id FROM receipts") as { app_user_id: string }[]) {
      counts[app_user_id] = (counts[app_user_id] ?? 0) + 1;
    }
  }
  return counts;
}

const HOSTILE = `o'brien"; DELETE FROM receipts; --`;
const WILDCARD = "%";
const LONG = "q'".repeat(128);
const DASHED = "-shopper";
// Neighbours a careless match would take along: a prefix, another case, what LIKE would match.
const NEIGHBOURS = ["o'brien", `O'BRIEN"; DELETE FROM RECEIPTS; --`, "anyone", "q'", "shopper"];

beforeAll(async () => {
  await migrateLocalShards(state);
  for (const appUserId of [HOSTILE, WILDCARD, LONG, DASHED, ...NEIGHBOURS]) seed(appUserId);
}, 180_000);

describe("docs/api.md#erasure npm run app-users: bad arguments, usage and exit 2", () => {
  it.each([
    ["no command", []],
    ["an unknown command", ["forget", "au-1"]],
    ["no app_user_id", ["erase"]],
    ["two app_user_ids", ["erase", "au-1", "au-2"]],
    ["an unknown flag", ["erase", "au-1", "--force"]],
    ["an empty app_user_id", ["erase", ""]],
    ["white space at an end", ["erase", " au-1"]],
    ["a control character", ["erase", "au-\u0007"]],
    ["a non-ASCII character", ["erase", "au-é"]],
    ["257 characters", ["erase", "a".repeat(257)]],
    ["--remote with --persist-to", ["erase", "au-1", "--remote"]],
  ])("%s", (_label, args) => {
    const result = appUsers(args);
    expect(result.status, result.stderr).toBe(2);
    expect(result.stderr).toContain("Usage: npm run app-users");
    expect(result.stdout).toBe("");
  });
});

describe("docs/api.md#erasure npm run app-users: the hash key", () => {
  it("--remote without AUDIT_HASH_KEY in the environment: exit 1 saying how to set it, before anything runs", () => {
    const result = runScript("app-users", ["erase", "au-1", "--remote"], undefined, { AUDIT_HASH_KEY: undefined });
    expect(result.status).toBe(1);
    expect(result.stderr).toContain("AUDIT_HASH_KEY");
    expect(result.stdout).toBe("");
  });

  it("a malformed key: exit 1, and the message does not quote it", () => {
    const result = appUsers(["erase", "au-1"], { AUDIT_HASH_KEY: "too-short-to-be-a-key" });
    expect(result.status).toBe(1);
    expect(result.stderr).toContain("AUDIT_HASH_KEY");
    expect(result.stderr).not.toContain("too-short-to-be-a-key");
  });
});

describe("docs/api.md#erasure npm run app-users -- erase", () => {
  it.each([
    ["quotes, a semicolon and a comment", HOSTILE, [HOSTILE]],
    ["a LIKE wildcard", WILDCARD, [WILDCARD]],
    ["256 characters of quotes", LONG, [LONG]],
    ["a leading hyphen, after --", DASHED, ["--", DASHED]],
  ])("an app_user_id with %s: --json prints the count, and exactly their receipts are gone from both shards", (_label, appUserId, args) => {
    const before = holders();
    const result = appUsers(["erase", "--json", ...args]);
    expect(result.status, result.stderr).toBe(0);
    expect(JSON.parse(result.stdout)).toEqual({ app_user_id: appUserId, receipts_erased: 2 });
    const { [appUserId]: erased, ...others } = before;
    expect(erased).toBe(2);
    expect(holders()).toEqual(others);
  });

  it("a second run erases 0 and succeeds; the plain output says so, per shard", () => {
    const result = appUsers(["erase", HOSTILE]);
    expect(result.status, result.stderr).toBe(0);
    expect(result.stdout).toContain(`Erased 0 receipts of app user ${JSON.stringify(HOSTILE)} (s1=0, s2=0).`);
    expect(result.stdout).toMatch(/Event [0-9a-f-]{36} \(app_user\.erased\)/);
  });

  it("the audit records name the erased app user only by the keyed hash, and the event is in the first shard's outbox", async () => {
    const hashed = await pseudonym(HOSTILE, parseAuditHashKey(KEY));
    const records = LOCAL_SHARDS.flatMap((shard) => localD1(state, shard, `SELECT * FROM audit_log WHERE app_user = '${hashed}'`));
    // One per erased receipt, and one per run (the first and the second).
    expect(records.filter((record) => record.receipt_id !== null)).toHaveLength(2);
    expect(records.filter((record) => record.receipt_id === null)).toHaveLength(2);
    expect(JSON.stringify(records)).not.toContain("brien");
    const events = localD1(state, "s1", "SELECT payload FROM notice_outbox WHERE json_extract(payload, '$.type') = 'app_user.erased'")
      .map((row) => JSON.parse(row.payload as string));
    expect(events.filter((event) => event.app_user_id === HOSTILE).map((event) => event.receipts).sort()).toEqual([0, 2]);
  });
});
