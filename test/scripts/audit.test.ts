/**
 * docs/api.md#audit, docs/operations.md "Who removed this receipt?": `npm run audit` on the two
 * shards of a throwaway local state. Most cases run the command in-process on those databases;
 * the last block runs it as a real process.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AUDIT_USAGE, auditCommand } from "../../scripts/lib/audit-command.ts";
import { execute } from "../../scripts/lib/d1.ts";
import { closeLocalStates } from "../../scripts/lib/local-state.ts";
import type { AuditRecord } from "../../src/storage/audit.ts";
import { sqlLiteral } from "../../src/storage/statement.ts";
import { shardTag, stampShardTag } from "../../src/shared/shard-ids.ts";
import { localD1, migrateLocalShards } from "../support/local-d1.ts";
import { freshState, runInProcess, runScript } from "../support/run-script.ts";

const state = freshState();
/** `npm run audit` in-process, on the test's local state. */
const audit = (...args: string[]) => runInProcess(AUDIT_USAGE, auditCommand(execute), [...args, "--persist-to", state]);
/** `npm run audit` as an operator runs it: a process of its own. */
const spawned = (...args: string[]) => runScript("audit", [...args, "--persist-to", state]);

const ON_S1 = stampShardTag("019aa8a4-3c1e-7000-8000-000000000001", shardTag("s1"));
const ON_S2 = stampShardTag("019aa8a4-3c1e-7000-8000-000000000002", shardTag("s2"));
const ERASED = "hmac-sha256:" + "ab".repeat(32);

/** The records as the shards hold them, oldest first. */
const RECORDS: (AuditRecord & { shard: string })[] = [
  { shard: "s1", at: "2026-10-01T08:00:00.000Z", action: "receipt.deleted", receipt_id: ON_S1, chain_id: "chain-nord", client_id: "pos-1", app_user: "au-1", request_id: "8c1f2d3e4a5b6c7d-AMS" },
  { shard: "s2", at: "2026-11-02T09:00:00.000Z", action: "receipt.deleted", receipt_id: ON_S2, chain_id: "chain-nord", client_id: "pos-2", app_user: "au-2", request_id: "9d2e3f4a5b6c7d8e-FRA" },
  { shard: "s2", at: "2026-11-20T10:00:00.000Z", action: "app_user.erased", receipt_id: stampShardTag("019aa8a4-3c1e-7000-8000-000000000003", shardTag("s2")), chain_id: "chain-nord", client_id: "operator", app_user: ERASED, request_id: "019abcde-0000-7000-8000-000000000009" },
  { shard: "s1", at: "2026-11-20T10:00:01.000Z", action: "app_user.erased", receipt_id: null, chain_id: null, client_id: "operator", app_user: ERASED, request_id: "019abcde-0000-7000-8000-000000000009" },
  { shard: "s1", at: "2026-11-21T11:00:00.000Z", action: "receipt.deleted", receipt_id: stampShardTag("019aa8a4-3c1e-7000-8000-000000000004", shardTag("s1")), chain_id: "chain-sud", client_id: "pos-1", app_user: "au-3", request_id: "ref-4" },
];

const printed = ({ shard: _shard, ...record }: (typeof RECORDS)[number]): AuditRecord => record;
const newestFirst = (records: typeof RECORDS) => [...records].reverse().map(printed);

beforeAll(async () => {
  migrateLocalShards(state);
  for (const shard of ["s1", "s2"]) {
    const values = RECORDS.filter((record) => record.shard === shard).map(
      ({ at, action, receipt_id, chain_id, client_id, app_user, request_id }) =>
        `(${[at, action, receipt_id, chain_id, client_id, app_user, request_id].map(sqlLiteral).join(", ")})`,
    );
    await localD1(state, shard, `INSERT INTO audit_log (at, action, receipt_id, chain_id, client_id, app_user, request_id) VALUES ${values.join(", ")}`);
  }
}, 120_000);
afterAll(() => closeLocalStates());

describe("docs/api.md#audit npm run audit: bad arguments, usage and exit 2", () => {
  it.each([
    ["nothing", []],
    ["an unknown subject", ["store", "s-1"]],
    ["no ID", ["chain"]],
    ["two IDs", ["chain", "a", "b"]],
    ["an unknown flag", ["chain", "a", "--all"]],
    ["an empty ID", ["chain", ""]],
    ["a --since that is no date", ["chain", "a", "--since", "yesterday"]],
    ["a --since without an offset", ["chain", "a", "--since", "2026-11-01T10:00:00"]],
    ["a --since on a day that does not exist", ["chain", "a", "--since", "2026-02-30"]],
    ["--remote with --persist-to", ["chain", "a", "--remote"]],
  ])("%s", async (_label, args) => {
    const result = await audit(...args);
    expect(result.status, result.stderr).toBe(2);
    expect(result.stderr).toContain("Usage: npm run audit");
    expect(result.stdout).toBe("");
  });
});

describe("docs/api.md#audit npm run audit: records of every shard, newest first", () => {
  it("chain --json: one JSON array of the documented fields, from both shards", async () => {
    const result = await audit("chain", "chain-nord", "--json");
    expect(result.status, result.stderr).toBe(0);
    expect(JSON.parse(result.stdout)).toEqual(newestFirst(RECORDS.filter((record) => record.chain_id === "chain-nord")));
  });

  it("chain --since a date-time with an offset keeps the records at or after it", async () => {
    const result = await audit("chain", "chain-nord", "--json", "--since", "2026-11-02T10:00:00+01:00");
    expect(JSON.parse(result.stdout)).toEqual(newestFirst(RECORDS.filter((record) => record.chain_id === "chain-nord" && record.at >= "2026-11-02T09:00:00.000Z")));
  });

  it("chain --since a leap second keeps the records from the second after it", async () => {
    const result = await audit("chain", "chain-nord", "--json", "--since", "2026-11-20T10:59:60+01:00");
    expect(result.status, result.stderr).toBe(0);
    expect(JSON.parse(result.stdout)).toEqual(newestFirst(RECORDS.filter((record) => record.chain_id === "chain-nord" && record.at >= "2026-11-20T10:00:00.000Z")));
  });

  it("client --since a date", async () => {
    const result = await audit("client", "pos-1", "--json", "--since", "2026-11-01");
    expect(JSON.parse(result.stdout)).toEqual(newestFirst(RECORDS.filter((record) => record.client_id === "pos-1" && record.at >= "2026-11-01")));
  });

  it("client operator lists the erasures", async () => {
    const result = await audit("client", "operator", "--json");
    expect(JSON.parse(result.stdout)).toEqual(newestFirst(RECORDS.filter((record) => record.client_id === "operator")));
  });

  it("receipt: the records of that receipt, from the shard its ID names", async () => {
    const result = await audit("receipt", ON_S2, "--json");
    expect(JSON.parse(result.stdout)).toEqual([printed(RECORDS[1]!)]);
  });

  it("plain output: a header row and aligned columns, '-' for what an erasure's own record lacks", async () => {
    const result = await audit("client", "operator");
    expect(result.status, result.stderr).toBe(0);
    const receiptId = RECORDS[2]!.receipt_id!;
    const request = "019abcde-0000-7000-8000-000000000009";
    expect(result.stdout.split("\n")).toEqual([
      `AT                        ACTION           ${"RECEIPT_ID".padEnd(receiptId.length)}  CHAIN_ID    CLIENT_ID  ${"APP_USER".padEnd(ERASED.length)}  REQUEST_ID`,
      `2026-11-20T10:00:01.000Z  app_user.erased  ${"-".padEnd(receiptId.length)}  -           operator   ${ERASED}  ${request}`,
      `2026-11-20T10:00:00.000Z  app_user.erased  ${receiptId}  chain-nord  operator   ${ERASED}  ${request}`,
      "",
    ]);
  });

  it.each([
    ["an ID holding SQL", "chain-nord' OR '1'='1"],
    ["a LIKE wildcard", "chain-%"],
    ["another case", "CHAIN-NORD"],
    ["a receipt_id that names no shard", "not-a-receipt"],
  ])("%s matches nothing: an empty array, exit 0", async (_label, id) => {
    const result = await audit(id === "not-a-receipt" ? "receipt" : "chain", id, "--json");
    expect(result.status, result.stderr).toBe(0);
    expect(JSON.parse(result.stdout)).toEqual([]);
  });
});

describe("docs/api.md#audit npm run audit as a process, through wrangler", () => {
  it("chain --json prints the records of both shards; bad arguments exit 2 with the usage", () => {
    const result = spawned("chain", "chain-nord", "--json");
    expect(result.status, result.stderr).toBe(0);
    expect(JSON.parse(result.stdout)).toEqual(newestFirst(RECORDS.filter((record) => record.chain_id === "chain-nord")));
    const bad = spawned("chain", "a", "--since", "yesterday");
    expect(bad.status, bad.stderr).toBe(2);
    expect(bad.stderr).toContain("Usage: npm run audit");
    expect(bad.stdout).toBe("");
  }, 60_000);
});
