/**
 * The remote operator commands' way to D1 (scripts/lib/d1-remote.ts), against a local fake of the
 * Cloudflare API whose query endpoint binds params as strings on a real local D1
 * (test/support/fake-d1-api.ts): the conformance suite of statements
 * (test/support/statement-conformance.ts), its errors, and that no value reaches any process's
 * arguments.
 */
import { chmodSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { remoteD1With } from "../../scripts/lib/d1-remote.ts";
import { closeLocalStates } from "../../scripts/lib/local-state.ts";
import { configPaths, readShards, type ConfigShard } from "../../scripts/lib/shards.ts";
import { sqlLiteral, statement, type Statement } from "../../src/storage/statement.ts";
import { fakeDatabaseId, FAKE_ACCOUNT, startFakeD1Api, type FakeD1Api } from "../support/fake-d1-api.ts";
import { localD1, migrateLocalShards } from "../support/local-d1.ts";
import { freshState, runScriptAsync } from "../support/run-script.ts";
import { CONFORMANCE_CASES, describeStatementConformance } from "../support/statement-conformance.ts";

const TOKEN = "fake-token-5c1d9e";
const state = freshState();
const { api: config } = configPaths();
const [s1, s2] = readShards(config).map((shard): ConfigShard => ({ ...shard, config }));
let fake: FakeD1Api;

/** A runner on the fake alone: a token in the environment, and no wrangler to ask. */
const runnerOnFake = (token = TOKEN) =>
  remoteD1With({
    env: { CLOUDFLARE_API_BASE_URL: fake.url, CLOUDFLARE_API_TOKEN: token },
    wrangler: (args) => Promise.reject(new Error(`unexpected wrangler ${args.join(" ")}`)),
  });

beforeAll(async () => {
  migrateLocalShards(state);
  fake = await startFakeD1Api({ token: TOKEN, config, persistTo: state });
}, 120_000);
afterAll(async () => {
  await fake?.close();
  await closeLocalStates();
});

let suiteRunner: ReturnType<typeof runnerOnFake> | undefined;
describeStatementConformance("through D1's query API", async (statements) =>
  (await (suiteRunner ??= runnerOnFake()).batch(s1!, statements)).map(({ results }) => results),
);

describe("remote commands reach D1 through its query API", () => {
  it("the fake binds what it receives as text, as D1's API does: numbers sent as strings would mean something else", async () => {
    const { statements, rows } = CONFORMANCE_CASES.find((each) => each.name === "numbers compare as numbers and text as text")!;
    const response = await fetch(`${fake.url}/accounts/${FAKE_ACCOUNT}/d1/database/${fakeDatabaseId(s1!.database_name)}/query`, {
      method: "POST",
      headers: { Authorization: `Bearer ${TOKEN}`, "Content-Type": "application/json" },
      body: JSON.stringify({ batch: statements.map(({ sql, params }) => ({ sql, params: params.map(String) })) }),
    });
    const { result } = (await response.json()) as { result: { results: unknown[] }[] };
    expect(result.map(({ results }) => results)).not.toEqual(rows);
  });

  it("looks up the account and each database once a process", async () => {
    const runner = runnerOnFake();
    const before = fake.requests.length;
    for (const shard of [s1!, s2!, s1!, s2!]) await runner.batch(shard, [statement("SELECT ?1 AS value", "x")]);
    const lookups = fake.requests.slice(before).map(({ method, path }) => `${method} ${path.replace(/^\/client\/v4/, "")}`);
    expect(lookups.filter((each) => each.startsWith("GET"))).toEqual([
      "GET /accounts",
      `GET /accounts/${FAKE_ACCOUNT}/d1/database?name=${s1!.database_name}`,
      `GET /accounts/${FAKE_ACCOUNT}/d1/database?name=${s2!.database_name}`,
    ]);
    expect(lookups.filter((each) => each.startsWith("POST"))).toHaveLength(4);
  });

  it("a statement D1 refuses fails with the API's message on one line, naming the database, never the token", async () => {
    const failure = runnerOnFake().batch(s1!, [statement("SELECT no_such_column FROM receipts WHERE receipt_id = ?1", "x")]);
    await expect(failure).rejects.toThrow(/^D1 query on receipts-v2-s1: .*no such column: no_such_column.*\[code: 7500\]$/);
    const message = ((await failure.catch((error: unknown) => error)) as Error).message;
    expect(message).not.toContain("\n");
    expect(message).not.toContain(TOKEN);
  });

  it("without a token in the environment or a login, the command fails on one line saying how to log in", async () => {
    const runner = remoteD1With({
      env: { CLOUDFLARE_API_BASE_URL: fake.url },
      wrangler: () => Promise.reject(new Error("wrangler auth token failed:\n✘ [ERROR] Not logged in.\n\nRun wrangler login.")),
    });
    const failure = runner.batch(s1!, [statement("SELECT 1")]);
    await expect(failure).rejects.toThrow(/^Reading wrangler's credentials failed \(.*Not logged in.*\): log in with `npx wrangler login` or set CLOUDFLARE_API_TOKEN\.$/);
  });

  it("credentials the API refuses fail with its message, never the token", async () => {
    const wrong = `${TOKEN}-wrong`;
    const failure = runnerOnFake(wrong).batch(s1!, [statement("SELECT 1")]);
    await expect(failure).rejects.toThrow(/^Finding the Cloudflare account: Authentication error \[code: 10000\]$/);
    expect(((await failure.catch((error: unknown) => error)) as Error).message).not.toContain(wrong);
  });
});

describe("a remote command puts no value in any process's arguments", () => {
  // A chain ID an operator asks about; no process's arguments but the command's own may hold it.
  const CHAIN = "chain-7f3c9e-argv-probe";

  it(
    "npm run audit -- chain <id> --remote asks wrangler for its token alone, and the ID goes to D1 as a parameter",
    async () => {
      await localD1(
        state,
        "s2",
        `INSERT INTO audit_log (at, action, receipt_id, chain_id, client_id, app_user, request_id) VALUES
          ('2026-11-20T10:00:00.000Z', 'receipt.deleted', NULL, ${sqlLiteral(CHAIN)}, 'pos-1', 'au-1', 'ref-1')`,
      );
      // A wrangler first on PATH that records every call, and answers `auth token --json` as a logged-in one does.
      const bin = mkdtempSync(path.join(tmpdir(), "fake-wrangler-"));
      const log = path.join(bin, "calls.log");
      writeFileSync(log, "");
      writeFileSync(
        path.join(bin, "wrangler"),
        `#!/bin/sh
{ for arg in "$@"; do printf '%s\\n' "$arg"; done; echo '--end--'; } >> "$FAKE_WRANGLER_LOG"
if [ "$*" = "auth token --json" ]; then echo '{"type":"oauth","token":"${TOKEN}"}'; exit 0; fi
echo "fake wrangler: unexpected call" >&2
exit 1
`,
      );
      chmodSync(path.join(bin, "wrangler"), 0o755);
      const before = fake.requests.length;

      const result = await runScriptAsync("audit", ["chain", CHAIN, "--remote", "--json"], {
        PATH: `${bin}${path.delimiter}${process.env.PATH}`,
        FAKE_WRANGLER_LOG: log,
        CLOUDFLARE_API_BASE_URL: fake.url,
        CLOUDFLARE_API_TOKEN: undefined,
        CLOUDFLARE_API_KEY: undefined,
        CLOUDFLARE_EMAIL: undefined,
        CLOUDFLARE_ACCOUNT_ID: undefined,
      });

      expect(result.status, result.stderr).toBe(0);
      expect(JSON.parse(result.stdout)).toEqual([
        { at: "2026-11-20T10:00:00.000Z", action: "receipt.deleted", receipt_id: null, chain_id: CHAIN, client_id: "pos-1", app_user: "au-1", request_id: "ref-1" },
      ]);
      const calls = readFileSync(log, "utf8").split("--end--\n").filter(Boolean).map((call) => call.split("\n").filter(Boolean));
      expect(calls).toEqual([["auth", "token", "--json"]]);
      const hex = Buffer.from(CHAIN).toString("hex");
      for (const arg of calls.flat()) expect(arg.includes(CHAIN) || arg.toLowerCase().includes(hex)).toBe(false);
      // Both shards were asked, with the ID a parameter of the query and nowhere in its SQL.
      const queries = fake.requests.slice(before).filter(({ method }) => method === "POST");
      expect(queries).toHaveLength(2);
      for (const { body } of queries) {
        const { sql, params } = (body as { batch: Statement[] }).batch[0]!;
        expect(sql).not.toContain(CHAIN);
        expect(sql.toLowerCase()).not.toContain(hex);
        expect(params).toContain(CHAIN);
      }
    },
    120_000,
  );
});
