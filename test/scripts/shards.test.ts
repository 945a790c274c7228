/**
 * `npm run shards` (docs/operations.md#shards) against a throwaway local state and a copy of both
 * Workers' configs (--config-dir), so that no test ever edits the project's wrangler.jsonc files.
 * Most cases run the commands in-process, their shard states in the local SHARD_STATES; the last
 * block runs list, close and open as real processes, and add runs so where its migrations fail.
 */
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { dispatch } from "../../scripts/lib/cli.ts";
import { closeLocalStates, localState } from "../../scripts/lib/local-state.ts";
import { SHARDS_USAGE, shardCommands } from "../../scripts/lib/shard-commands.ts";
import { shardStatesOf } from "../../scripts/lib/shard-states.ts";
import { shardTag } from "../../src/shared/shard-ids.ts";
import {
  addConflict,
  countAndSize,
  createdDatabaseId,
  shardsOfConfigText,
  targetShards,
  withShardBlock,
} from "../../scripts/lib/shards.ts";
import { migrateLocalShards } from "../support/local-d1.ts";
import { PROCESSES_MS, ROOT, freshState, runInProcess, runScriptAsync, runWranglerAsync, type ScriptResult } from "../support/run-script.ts";

const state = freshState();
const configDir = mkdtempSync(path.join(tmpdir(), "receipts-configs-"));
const API_CONFIG = path.join(configDir, "wrangler.jsonc");
const NOTIFIER_CONFIG = path.join(configDir, "src/notifier/wrangler.jsonc");

// The copy: both configs where the project keeps them, and the migrations they name.
copyFileSync(path.join(ROOT, "wrangler.jsonc"), API_CONFIG);
mkdirSync(path.dirname(NOTIFIER_CONFIG), { recursive: true });
copyFileSync(path.join(ROOT, "src/notifier/wrangler.jsonc"), NOTIFIER_CONFIG);
symlinkSync(path.join(ROOT, "migrations"), path.join(configDir, "migrations"));
const ORIGINAL_API = readFileSync(API_CONFIG, "utf8");
const ORIGINAL_NOTIFIER = readFileSync(NOTIFIER_CONFIG, "utf8");

/** `shards <command> --persist-to <state> --config-dir <copy> <args>`: the flags before any `--` in args. */
const argsOf = (command?: string, ...args: string[]) =>
  command === undefined ? [] : [command, "--persist-to", state, "--config-dir", configDir, ...args];
/** A command of `npm run shards`, in-process. */
const shards = (command?: string, ...args: string[]): Promise<ScriptResult> =>
  runInProcess(SHARDS_USAGE, (argv) => dispatch(shardCommands(shardStatesOf), argv), argsOf(command, ...args));
/** A command of `npm run shards` as an operator runs it: a process of its own. */
const spawned = (command?: string, ...args: string[]): Promise<ScriptResult> => runScriptAsync("shards", argsOf(command, ...args));

interface Row {
  name: string;
  binding: string;
  state: string;
  receipts: number;
  bytes: number;
}

async function listed(): Promise<Row[]> {
  const result = await shards("list", "--json");
  expect(result.status, result.stderr).toBe(0);
  return JSON.parse(result.stdout) as Row[];
}

/** Runs wrangler on the copied configs and the throwaway state, without waiting on the others. */
const wranglerAsync = (args: string[]): Promise<string> => runWranglerAsync([...args, "-c", API_CONFIG, "--local", "--persist-to", state]);

beforeAll(async () => {
  // What `npm start` does first: the tables on both shards.
  migrateLocalShards(state);
}, 120_000);
afterAll(() => closeLocalStates());

/** A valid name whose ID tag is s1's: add must refuse it. */
function nameWithTagOf(shard: string): string {
  const chars = "abcdefghijklmnopqrstuvwxyz0123456789";
  for (const a of chars.slice(0, 26)) for (const b of chars) for (const c of chars) {
    if (shardTag(a + b + c) === shardTag(shard)) return a + b + c;
  }
  throw new Error("no colliding name of three characters");
}

describe("docs/operations.md#shards npm run shards: bad arguments change nothing", () => {
  it.each([
    ["no command", []],
    ["an unknown command", ["drop", "s1"]],
    ["an unknown flag", ["list", "--all"]],
    ["an argument to list", ["list", "s1"]],
    ["close without a name", ["close"]],
    ["close with two names", ["close", "s1", "s2"]],
    ["close of an unknown shard", ["close", "s9"]],
    ["open of an unknown shard", ["open", "zz"]],
    ["close of a binding's spelling", ["close", "DB_S1"]],
    ["open of an upper-case name", ["open", "S1"]],
    ["add of a name that starts with a digit", ["add", "3s"]],
    ["add of a name of 21 characters", ["add", `s${"x".repeat(20)}`]],
    ["add of SQL", ["add", "s3'; DROP TABLE receipts --"]],
    ["add of an option's spelling", ["add", "--", "--remote"]],
    ["add of an empty name", ["add", ""]],
    ["add of an existing shard", ["add", "s2"]],
    ["add of a name whose ID tag is s1's", ["add", nameWithTagOf("s1")]],
  ])("%s: usage on standard error, exit 2", async (_label, args) => {
    const result = await shards(...args);
    expect(result.status, result.stderr).toBe(2);
    expect(result.stderr).toContain("Usage: npm run shards");
    expect(result.stdout).toBe("");
  });

  it("--remote with --persist-to: exit 2", async () => {
    const result = await shards("list", "--remote");
    expect(result.status).toBe(2);
  });

  it("the configs are as they were", async () => {
    expect(readFileSync(API_CONFIG, "utf8")).toBe(ORIGINAL_API);
    expect(readFileSync(NOTIFIER_CONFIG, "utf8")).toBe(ORIGINAL_NOTIFIER);
  });
});

describe("docs/operations.md#shards list, close, open, add", () => {
  it("list --json: both shards of wrangler.jsonc, open, empty, with their size", async () => {
    const rows = (await listed());
    expect(rows).toEqual([
      { name: "s1", binding: "DB_S1", state: "open", receipts: 0, bytes: expect.any(Number) },
      { name: "s2", binding: "DB_S2", state: "open", receipts: 0, bytes: expect.any(Number) },
    ]);
    expect(rows[0]!.bytes).toBeGreaterThan(0);
  });

  it("close writes the state as operator, then list shows it closed; open reopens it", async () => {
    const before = Date.now();
    const closed = await shards("close", "s1");
    expect(closed.status, closed.stderr).toBe(0);
    expect(closed.stdout).toContain("s1 is now closed");
    expect(closed.stdout).toContain("65 s");
    const record = JSON.parse((await localState({ remote: false, persistTo: state }, API_CONFIG).kv("SHARD_STATES", (namespace) => namespace.get("shard:s1", "text")))!) as {
      state: string;
      changed_at: string;
      by: string;
    };
    expect(record).toEqual({ state: "closed", changed_at: expect.any(String), by: "operator" });
    expect(Date.parse(record.changed_at)).toBeGreaterThanOrEqual(before - 1000);
    expect((await listed()).map(({ name, state }) => [name, state])).toEqual([["s1", "closed"], ["s2", "open"]]);

    const opened = await shards("open", "s1");
    expect(opened.status, opened.stderr).toBe(0);
    expect(opened.stdout).toContain("s1 is now open");
    expect((await listed()).map(({ name, state }) => [name, state])).toEqual([["s1", "open"], ["s2", "open"]]);
  });

  it("close of the last open shard: refused with exit 2 and nothing changed, unless --force", async () => {
    expect((await shards("close", "s1")).status).toBe(0);
    const refused = await shards("close", "s2");
    expect(refused.status, refused.stderr).toBe(2);
    expect(refused.stderr).toContain("last open shard");
    expect(refused.stderr).toContain("--force");
    expect((await listed()).map(({ name, state }) => [name, state])).toEqual([["s1", "closed"], ["s2", "open"]]);

    const forced = await shards("close", "s2", "--force");
    expect(forced.status, forced.stderr).toBe(0);
    expect(forced.stderr).toContain("no shard is open now");
    expect((await listed()).map(({ name, state }) => [name, state])).toEqual([["s1", "closed"], ["s2", "closed"]]);
    for (const name of ["s1", "s2"]) expect((await shards("open", name)).status).toBe(0);
  }, PROCESSES_MS);

  it("add s3: kept out of the committed configs, in git-ignored local copies that bind it after s2; migrated, closed until opened", async () => {
    const added = await shards("add", "s3");
    expect(added.status, added.stderr).toBe(0);
    expect(added.stdout).toContain("open s3");
    expect(added.stdout).toContain("To undo");

    // The committed configs, which the test suite reads, are untouched.
    expect(readFileSync(API_CONFIG, "utf8")).toBe(ORIGINAL_API);
    expect(readFileSync(NOTIFIER_CONFIG, "utf8")).toBe(ORIGINAL_NOTIFIER);
    const local = JSON.parse(readFileSync(path.join(configDir, "shards.local.json"), "utf8")) as { name: string; database_id: string }[];
    expect(local).toEqual([{ name: "s3", database_id: expect.stringMatching(/^[0-9a-f-]{36}$/) }]);
    const id = local[0]!.database_id;

    for (const [file, original, migrations] of [
      [path.join(configDir, "wrangler.local.jsonc"), ORIGINAL_API, "migrations"],
      [path.join(configDir, "src/notifier/wrangler.local.jsonc"), ORIGINAL_NOTIFIER, "../../migrations"],
    ] as const) {
      const text = readFileSync(file, "utf8");
      const block = `,\n    {\n      "binding": "DB_S3",\n      "database_name": "receipts-v2-s3",\n      "database_id": "${id}",\n      "migrations_dir": "${migrations}"\n    }`;
      // Right after s2's entry, and nothing else changed but a header saying where it comes from.
      const s2End = original.indexOf("}", original.indexOf('"DB_S2"')) + 1;
      expect(text).toMatch(/^\/\/ Generated from wrangler\.jsonc and shards\.local\.json/);
      expect(text.endsWith(original.slice(0, s2End) + block + original.slice(s2End)), file).toBe(true);
      expect(shardsOfConfigText(text).map(({ name }) => name)).toEqual(["s1", "s2", "s3"]);
    }
    expect(readdirSync(configDir).filter((name) => name.includes("adding"))).toEqual([]);
    // The project's own configs are untouched.
    expect(readFileSync(path.join(ROOT, "wrangler.jsonc"), "utf8")).not.toContain("receipts-v2-s3");
    expect(readFileSync(path.join(ROOT, "src/notifier/wrangler.jsonc"), "utf8")).not.toContain("receipts-v2-s3");

    expect((await listed())).toEqual([
      expect.objectContaining({ name: "s1", state: "open" }),
      expect.objectContaining({ name: "s2", state: "open" }),
      { name: "s3", binding: "DB_S3", state: "closed", receipts: 0, bytes: expect.any(Number) },
    ]);

    // The other operator commands (notices, audit) reach it locally, through the config that binds it.
    expect(targetShards({ remote: false }, configDir).map(({ name, config }) => [name, config])).toEqual(
      ["s1", "s2", "s3"].map((name) => [name, path.join(configDir, "wrangler.local.jsonc")]),
    );
    expect(targetShards({ remote: true }, configDir).map(({ name }) => name)).toEqual(["s1", "s2"]);

    const again = await shards("add", "s3");
    expect(again.status).toBe(2);
    expect(again.stderr).toContain("exists already");
  }, PROCESSES_MS);

  it("add whose migrations fail: no config binds the shard, so a running service never sees it unmigrated", async () => {
    const brokenDir = mkdtempSync(path.join(tmpdir(), "receipts-configs-"));
    copyFileSync(API_CONFIG, path.join(brokenDir, "wrangler.jsonc"));
    mkdirSync(path.join(brokenDir, "src/notifier"), { recursive: true });
    copyFileSync(NOTIFIER_CONFIG, path.join(brokenDir, "src/notifier/wrangler.jsonc"));
    mkdirSync(path.join(brokenDir, "migrations"));
    writeFileSync(path.join(brokenDir, "migrations/0001_broken.sql"), "CREATE TABLE receipts (;\n");

    const result = await runScriptAsync("shards", ["add", "s4", "--persist-to", freshState(), "--config-dir", brokenDir]);
    expect(result.status, result.stdout).toBe(1);
    expect(result.stderr).toContain("No config binds shard s4");
    expect(readdirSync(brokenDir).sort()).toEqual(["migrations", "src", "wrangler.jsonc"]);
    expect(readFileSync(path.join(brokenDir, "wrangler.jsonc"), "utf8")).toBe(ORIGINAL_API);
    expect(readdirSync(path.join(brokenDir, "src/notifier"))).toEqual(["wrangler.jsonc"]);
  }, 120_000);
});

describe("scripts/lib/shards.ts", () => {
  const CONFIG = `// head
{
  "d1_databases": [
    {
      "binding": "DB_S1", // first
      "database_name": "receipts-v2-s1",
      "database_id": "00000000-0000-4000-8000-000000000001",
      "migrations_dir": "migrations"
    },
    // not a shard
    {
      "binding": "AUDIT",
      "database_name": "other",
      "database_id": "00000000-0000-4000-8000-000000000009"
    }
  ],
  "kv_namespaces": [{ "binding": "CLIENTS" }]
}
`;

  it("reads only DB_<NAME> bindings, and adds after the last of them", () => {
    expect(shardsOfConfigText(CONFIG)).toEqual([
      { name: "s1", binding: "DB_S1", database_name: "receipts-v2-s1", database_id: "00000000-0000-4000-8000-000000000001", migrations_dir: "migrations", tag: shardTag("s1") },
    ]);
    const text = withShardBlock(CONFIG, { name: "b2", database_id: "11111111-1111-4111-8111-111111111111" });
    expect(text).toContain(
      '"migrations_dir": "migrations"\n    },\n    {\n      "binding": "DB_B2",\n      "database_name": "receipts-v2-b2",\n      "database_id": "11111111-1111-4111-8111-111111111111",\n      "migrations_dir": "migrations"\n    },\n    // not a shard',
    );
    expect(shardsOfConfigText(text).map(({ name }) => name)).toEqual(["b2", "s1"]);
  });

  it("refuses an existing name and a taken tag", () => {
    const existing = shardsOfConfigText(CONFIG);
    expect(addConflict("s1", existing)).toContain("exists already");
    expect(addConflict(nameWithTagOf("s1"), existing)).toContain("ID tag");
    expect(addConflict("s2", existing)).toBeUndefined();
  });

  it("reads the remote count and D1's size_after, and the id d1 create printed", () => {
    const remote = JSON.stringify([
      { results: [{ n: 1234 }], success: true, meta: { served_by: "v3-prod", duration: 0.3, changes: 0, size_after: 8_912_896, rows_read: 1234, rows_written: 0 } },
    ]);
    expect(countAndSize(remote)).toEqual({ receipts: 1234, bytes: 8_912_896 });
    expect(() => countAndSize(JSON.stringify([{ results: [{ n: 1 }], meta: { duration: 0 } }]))).toThrow(/unexpected output/);
    const created = `✅ Successfully created DB 'receipts-v2-s3'\n\n[[d1_databases]]\nbinding = "receipts_v2_s3"\ndatabase_name = "receipts-v2-s3"\ndatabase_id = "3f0a2c4e-5b6d-4e7f-8a9b-0c1d2e3f4a5b"\n`;
    expect(createdDatabaseId(created)).toBe("3f0a2c4e-5b6d-4e7f-8a9b-0c1d2e3f4a5b");
    expect(createdDatabaseId('{ "d1_databases": [{ "database_id": "3f0a2c4e-5b6d-4e7f-8a9b-0c1d2e3f4a5b" }] }')).toBe(
      "3f0a2c4e-5b6d-4e7f-8a9b-0c1d2e3f4a5b",
    );
  });
});

describe("docs/operations.md#shards list, close and open as processes, through wrangler", () => {
  const states = async () => {
    const result = await spawned("list", "--json");
    expect(result.status, result.stderr).toBe(0);
    return (JSON.parse(result.stdout) as Row[]).map(({ name, state }) => [name, state]);
  };

  it("before the first npm start, a command that reads the shards says in one line what to run first: exit 1", async () => {
    const fresh = freshState();
    const commands = [["shards", ["list"]], ["notices", ["failed"]], ["audit", ["chain", "c1"]]] as const;
    // At once: none of them writes anything.
    const results = await Promise.all(commands.map(([name, args]) => runScriptAsync(name, [...args, "--persist-to", fresh])));
    for (const [index, [name]] of commands.entries()) {
      const result = results[index]!;
      expect(result.status, `${name}: ${result.stderr}`).toBe(1);
      expect(result.stdout).toBe("");
      expect(result.stderr.trim().split("\n")).toEqual([
        `No local state yet in ${fresh}: run \`npm start -- --persist-to ${fresh}\` (or \`npm run shards -- migrate --persist-to ${fresh}\`) first.`,
      ]);
    }
  });

  it("close writes the local SHARD_STATES and list reads it; open reopens; bad arguments exit 2", async () => {
    // Refused before it opens the state: it runs beside the others.
    const usageRun = spawned("close");
    const closed = await spawned("close", "s1");
    expect(closed.status, closed.stderr).toBe(0);
    expect(closed.stdout).toContain("s1 is now closed");
    const record = JSON.parse(await wranglerAsync(["kv", "key", "get", "shard:s1", "--binding", "SHARD_STATES", "--text"])) as { state: string; by: string };
    expect(record).toMatchObject({ state: "closed", by: "operator" });
    expect(await states()).toEqual([["s1", "closed"], ["s2", "open"], ["s3", "closed"]]);
    const opened = await spawned("open", "s1");
    expect(opened.status, opened.stderr).toBe(0);
    expect(await states()).toEqual([["s1", "open"], ["s2", "open"], ["s3", "closed"]]);
    const usage = await usageRun;
    expect(usage.status).toBe(2);
    expect(usage.stderr).toContain("Usage: npm run shards");
    expect(usage.stdout).toBe("");
  }, PROCESSES_MS);
});
