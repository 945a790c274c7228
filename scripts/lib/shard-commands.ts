/**
 * The commands of `npm run shards` (docs/operations.md#shards), on the shard states that a
 * {@link StatesOf} gives: SHARD_STATES of the local state in-process, or the deployment's
 * through `wrangler kv`.
 */
import { readFileSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";
import { isShardOpen, shardBinding, type ShardState } from "../../src/shared/shard-ids.ts";
import { statement } from "../../src/storage/statement.ts";
import { UsageError, parse, positiveInteger, type Commands } from "./cli.ts";
import {
  addConflict,
  configPaths,
  countAndSize,
  createdDatabaseId,
  localConfigFiles,
  localConfigPaths,
  localShardsFile,
  readLocalShards,
  readShards,
  replaceIfChanged,
  shardDatabaseName,
  shardNameArgument,
  withShardBlock,
  type ConfigPaths,
  type ConfigShard,
} from "./shards.ts";
import { readConfigFile, type ConfigObject } from "./config.ts";
import { configJurisdiction, jurisdictionArgument, type Jurisdiction } from "./deploy-plan.ts";
import { NoLocalState, localState } from "./local-state.ts";
import type { ShardStates } from "./shard-states.ts";
import { PROJECT_ROOT, TARGET_OPTIONS, targetFlags, targetOf, wrangler, wranglerAsync, type Target } from "./wrangler.ts";

export const SHARDS_USAGE = `Usage: npm run shards -- <command> [options]

  list [--json]   every shard of wrangler.jsonc: name, binding, state, receipts, bytes
                  (--json: one JSON array of {"name","binding","state","receipts","bytes"})
  close <name>    the shard takes no new receipts; delete, replays and events go on.
                  The last open shard closes only with --force: then every add fails.
  open <name>     the shard takes new receipts (again)
                  Either lands within 65 s, without a deploy.
  add <name>      a new shard, closed: database receipts-v2-<name> bound as DB_<NAME> in
                  wrangler.jsonc and src/notifier/wrangler.jsonc, migrations applied. With
                  --remote it creates the database first, in the deployment's jurisdiction
                  (the one the configs record; --jurisdiction must name the same), and prints
                  what is left (npm run deploy, then open it).
  migrate         apply the pending files of migrations/ to every shard, up to --parallel <n>
                  shards at once (default 4 with --remote, 2 locally): a line per shard, then
                  a summary; exit 1 if a shard failed. Shards already migrated are skipped, so
                  after a failure run it again once the cause is fixed. Run it before deploying
                  a release (docs/operations.md "Deploy from zero").

A shard name is a lower-case letter, then up to 19 lower-case letters or digits.
Every command acts on the local state of 'npm start' unless --remote is given
(--persist-to <dir> picks another local state directory). --config-dir <dir> reads and
edits <dir>/wrangler.jsonc and <dir>/src/notifier/wrangler.jsonc instead of the project's.`;

const COMMON = {
  ...TARGET_OPTIONS,
  "config-dir": { type: "string" },
} as const;

/** One row of `list`, as `--json` prints it. */
interface ShardRow {
  name: string;
  binding: string;
  state: "open" | "closed";
  receipts: number | null;
  bytes: number | null;
  /** Only for a shard whose database could not be read: the command then prints no row and exits 1. */
  error?: string;
}

const COUNT_SQL = "SELECT COUNT(*) AS n FROM receipts";

/** The states of a target's shards (scripts/lib/shard-states.ts). */
export type StatesOf = (target: Target, configs: ConfigPaths) => ShardStates;

/** The commands by name, reading and writing shard states where `statesOf` says. */
export function shardCommands(statesOf: StatesOf): Commands {
  return {
    list: (args) => list(statesOf, args),
    close: (args) => setState(statesOf, "close", args),
    open: (args) => setState(statesOf, "open", args),
    add: (args) => add(statesOf, args),
    migrate: (args) => migrate(args),
  };
}

async function list(statesOf: StatesOf, argv: string[]): Promise<void> {
  const { values, positionals } = parse(argv, { ...COMMON, json: { type: "boolean" } });
  if (positionals.length > 0) throw new UsageError(`Unexpected argument: ${positionals[0]}`);
  const target = targetOf(values);
  const configs = configsFor(target, values["config-dir"]);
  const shards = readShards(configs.api);
  const states = await statesOf(target, configs).read(shards);
  const sizes = target.remote ? remoteSizes(configs, shards) : await localSizes(target, configs, shards);
  const rows: ShardRow[] = shards.map((shard) => {
    const size = sizes.get(shard.name)!;
    return {
      name: shard.name,
      binding: shard.binding,
      // As the API Worker reads it: open unless a record says otherwise.
      state: isShardOpen(states, shard.name) ? "open" : "closed",
      ...("error" in size ? { receipts: null, bytes: null, error: size.error } : size),
    };
  });
  // A row without its counts (`"receipts": null`) would read as an answer: a shard that could not
  // be read, after the local state's waits, fails the command with nothing on standard output.
  const failed = rows.filter((row) => row.error);
  if (failed.length > 0) {
    throw new Error(`${failed.map((row) => `Could not read shard ${row.name}: ${row.error}`).join("\n")}\nNo list printed; run the command again.`);
  }
  if (values.json) console.log(JSON.stringify(rows));
  else if (rows.length === 0) console.log("No shards in wrangler.jsonc.");
  else {
    for (const row of rows) console.log(`${row.name}\t${row.binding}\t${row.state}\treceipts=${row.receipts}\tbytes=${row.bytes}`);
  }
}

async function setState(statesOf: StatesOf, command: "open" | "close", argv: string[]): Promise<void> {
  const { values, positionals } = parse(argv, command === "close" ? { ...COMMON, force: { type: "boolean" } } : COMMON);
  if (positionals.length !== 1) throw new UsageError(`${command} needs exactly one shard name.`);
  const name = shardNameArgument(positionals[0]);
  const target = targetOf(values);
  const configs = configsFor(target, values["config-dir"]);
  const shards = readShards(configs.api);
  if (!shards.some((shard) => shard.name === name)) {
    throw new UsageError(`No shard ${name} in wrangler.jsonc (shards: ${shards.map((shard) => shard.name).join(", ")}).`);
  }
  const state: ShardState = { state: command === "open" ? "open" : "closed", changed_at: new Date().toISOString(), by: "operator" };
  // Read before the write: remotely, a read right after it might not see it yet.
  const others = command === "close" ? await statesOf(target, configs).read(shards) : new Map<string, ShardState>();
  const stillOpen = shards.filter((shard) => shard.name !== name && isShardOpen(others, shard.name));
  // With no open shard every new add is refused, so that takes a second, deliberate word.
  if (command === "close" && stillOpen.length === 0 && !("force" in values && values.force)) {
    throw new UsageError(`Shard ${name} is the last open shard: closing it stops every new add. Add --force to close it anyway.`);
  }
  await statesOf(target, configs).write(name, state);
  console.log(
    `Shard ${name} is now ${state.state} (${target.remote ? "deployed" : "local"} SHARD_STATES, ${state.changed_at}). ` +
      `The API Worker ${state.state === "open" ? "places new receipts on it" : "stops placing new receipts on it"} within 65 s.`,
  );
  if (command === "close" && stillOpen.length === 0) {
    console.error(`Warning: no shard is open now; adds fail until one is opened ('npm run shards -- open <name>').`);
  }
}

async function add(statesOf: StatesOf, argv: string[]): Promise<void> {
  const { values, positionals } = parse(argv, { ...COMMON, jurisdiction: { type: "string" } });
  if (positionals.length !== 1) throw new UsageError("add needs exactly one shard name.");
  const name = shardNameArgument(positionals[0]);
  const target = targetOf(values);
  const dir = values["config-dir"];
  const committed = configPaths(dir);
  const current = configsFor(target, dir);
  const conflict = addConflict(name, [...readShards(current.api), ...readShards(current.notifier)]);
  if (conflict) throw new UsageError(conflict);
  const jurisdiction = addJurisdiction(values.jurisdiction, [readConfigFile(committed.api), readConfigFile(committed.notifier)]);
  const databaseName = shardDatabaseName(name);
  const binding = shardBinding(name);

  let databaseId: string;
  if (target.remote) {
    console.log(`Creating D1 database ${databaseName}${jurisdiction ? ` in ${jurisdiction}` : ""}...`);
    databaseId = createdDatabaseId(wrangler(["d1", "create", databaseName, ...(jurisdiction ? ["--jurisdiction", jurisdiction] : []), "-c", committed.api]));
  } else {
    databaseId = crypto.randomUUID();
  }
  const shard = { name, database_id: databaseId };
  // Both configs are computed before anything is written, so a config that cannot take the block
  // leaves everything unchanged.
  const newApi = withShardBlock(readFileSync(current.api, "utf8"), shard, current.api);
  const newNotifier = withShardBlock(readFileSync(current.notifier, "utf8"), shard, current.notifier);

  // A running service (wrangler dev reloads a changed config within seconds; a deploy) must never
  // see the shard before it is recorded closed and migrated, or it places receipts on a database
  // without tables. So the configs it reads gain the binding last, and the migrations run on a
  // staged copy of the new config beside it (its relative paths hold there too).
  const state: ShardState = { state: "closed", changed_at: new Date().toISOString(), by: "operator" };
  await statesOf(target, committed).write(name, state);
  console.log(`Shard ${name} is closed in SHARD_STATES until opened.`);

  const staged = current.api.replace(/\.jsonc$/, ".adding.local.jsonc");
  writeFileSync(staged, newApi);
  try {
    console.log(`Applying the migrations to ${databaseName}...`);
    // Not blocking: the local state this process holds open keeps answering meanwhile.
    await wranglerAsync(["d1", "migrations", "apply", databaseName, "-c", staged, ...targetFlags(target)]);
  } catch (error) {
    throw new Error(
      `${(error as Error).message}\nNo config binds shard ${name} yet; fix the cause and run the same add again.`,
    );
  } finally {
    rmSync(staged, { force: true });
  }

  if (target.remote) {
    // The notifier first: it only reads a shard the API Worker places receipts on.
    replaceIfChanged(committed.notifier, newNotifier);
    replaceIfChanged(committed.api, newApi);
  } else {
    writeFileSync(localShardsFile(dir), `${JSON.stringify([...readLocalShards(dir), shard], null, 2)}\n`);
    localConfigPaths(dir);
  }
  const written = target.remote ? committed : localConfigFiles(dir);
  console.log(`Added ${binding} (database ${databaseName}, id ${databaseId}) to ${relative(written.api)} and ${relative(written.notifier)}.`);

  if (target.remote) {
    console.log(`Shard ${name} is created, migrated and closed. What is left, in this order:
  1. Commit ${relative(committed.api)} and ${relative(committed.notifier)}.
  2. npm run deploy                              # the notifier first, then the API Worker
  3. npm run shards -- open ${name} --remote     # within 65 s it takes new receipts`);
  } else {
    console.log(`Shard ${name} is ready and closed locally, in the git-ignored ${relative(localShardsFile(dir))}
(the committed wrangler.jsonc files are unchanged). Restart 'npm start' if it runs, so both Workers
bind it, then:
  npm run shards -- open ${name}
To undo: delete ${relative(localShardsFile(dir))} and the wrangler.local.jsonc files.`);
  }
}

/**
 * The jurisdiction a new shard's database is created in: the deployment's, as its configs record
 * it; a --jurisdiction that names another is a UsageError, since one deployment's shards cannot
 * live in two.
 */
export function addJurisdiction(given: string | undefined, configs: readonly ConfigObject[]): Jurisdiction | undefined {
  const recorded = configJurisdiction(configs);
  if (given === undefined) return recorded;
  let wanted: Jurisdiction;
  try {
    wanted = jurisdictionArgument(given);
  } catch (error) {
    throw new UsageError((error as Error).message);
  }
  if (wanted !== recorded) {
    throw new UsageError(`The deployment's stores are in ${recorded ?? "the default jurisdiction"} (its configs say so), not ${wanted}: a shard lives where the others do.`);
  }
  return wanted;
}

/** Shards migrated at once unless --parallel says: D1's API takes a few side by side; locally each is a workerd. */
const MIGRATE_PARALLEL = { remote: 4, local: 2 } as const;
/** More at once than this would meet the Cloudflare API's rate limit (1,200 calls in 5 minutes) sooner, not finish sooner. */
const MIGRATE_PARALLEL_MAX = 16;

/** What `migrate` did on one shard. */
type Migrated = { shard: string; applied: string[] } | { shard: string; error: string };

async function migrate(argv: string[]): Promise<void> {
  const { values, positionals } = parse(argv, { ...COMMON, parallel: { type: "string" } });
  if (positionals.length > 0) throw new UsageError(`Unexpected argument: ${positionals[0]}`);
  const target = targetOf(values);
  const parallel = values.parallel === undefined ? MIGRATE_PARALLEL[target.remote ? "remote" : "local"] : positiveInteger("--parallel", values.parallel);
  if (parallel > MIGRATE_PARALLEL_MAX) throw new UsageError(`--parallel is at most ${MIGRATE_PARALLEL_MAX}.`);
  const configs = configsFor(target, values["config-dir"]);
  const shards = readShards(configs.api);
  if (shards.length === 0) throw new Error(`No shards in ${relative(configs.api)}.`);
  console.log(`Migrating ${shards.length} shard(s) (${target.remote ? "deployed" : "local"}), ${parallel} at once...`);
  const results = await eachAtMost(parallel, shards, async (shard): Promise<Migrated> => {
    let result: Migrated;
    try {
      const output = await wranglerAsync(["d1", "migrations", "apply", shard.database_name, "-c", configs.api, ...targetFlags(target)]);
      result = { shard: shard.name, applied: appliedMigrations(output) };
    } catch (error) {
      result = { shard: shard.name, error: errorGist(error) };
    }
    console.log(
      "error" in result
        ? `${shard.name}\tfailed: ${result.error}`
        : `${shard.name}\t${result.applied.length === 0 ? "up to date" : `applied ${result.applied.join(", ")}`}`,
    );
    return result;
  });
  const failed = results.filter((result) => "error" in result);
  const applied = results.filter((result) => "applied" in result && result.applied.length > 0).length;
  console.log(`${applied} shard(s) migrated, ${results.length - applied - failed.length} up to date, ${failed.length} failed.`);
  if (failed.length > 0) {
    throw new Error(
      `Shard(s) ${failed.map((result) => result.shard).join(", ")} failed (see their lines). Fix the cause and run the same ` +
        "command again: the migrations each shard has are skipped, and a migration that failed left its shard as it was. " +
        "Do not deploy before every shard is migrated.",
    );
  }
}

/**
 * The migrations `wrangler d1 migrations apply` printed as applied (✅ rows of its table), each
 * once: it prints the table again after each migration it applies. None when there were none.
 */
export function appliedMigrations(output: string): string[] {
  return [...new Set([...output.matchAll(/│\s*(\S+\.sql)\s*│\s*✅/g)].map((match) => match[1]!))];
}

/** `work` on every item, at most `limit` at once; the results in the items' order. */
async function eachAtMost<T, R>(limit: number, items: readonly T[], work: (item: T) => Promise<R>): Promise<R[]> {
  const results: R[] = new Array(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const index = next++;
      results[index] = await work(items[index]!);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return results;
}

/** The configs a command acts on: the committed ones for the deployment, the local ones otherwise. */
function configsFor(target: Target, dir: string | undefined): ConfigPaths {
  return target.remote ? configPaths(dir) : localConfigPaths(dir);
}

type Size = { receipts: number; bytes: number } | { error: string };

/** Each deployed shard's count and size: one `wrangler d1 execute` each, its meta.size_after. */
function remoteSizes(configs: ConfigPaths, shards: readonly ConfigShard[]): Map<string, Size> {
  const sizes = new Map<string, Size>();
  for (const shard of shards) {
    try {
      const output = wrangler(["d1", "execute", shard.database_name, "--json", "--command", COUNT_SQL, "-c", configs.api, "--remote"]);
      sizes.set(shard.name, countAndSize(output));
    } catch (error) {
      sizes.set(shard.name, { error: errorGist(error) });
    }
  }
  return sizes;
}

/**
 * Each local shard's count and size, on the local state opened in-process, where every result
 * carries `size_after` as it does remotely (`wrangler d1 execute --local` keeps only the
 * duration of a result's meta, and the local D1 refuses `PRAGMA page_count`). A state without
 * tables ends the command with the one line that says what to run first.
 */
async function localSizes(target: Target, configs: ConfigPaths, shards: readonly ConfigShard[]): Promise<Map<string, Size>> {
  const sizes = new Map<string, Size>();
  const state = localState(target, configs.api);
  for (const shard of shards) {
    try {
      const [result] = await state.batch<{ n: number }>(shard, [statement(COUNT_SQL)]);
      sizes.set(shard.name, { receipts: result!.results[0]?.n ?? 0, bytes: result!.meta.size_after as number });
    } catch (error) {
      if (error instanceof NoLocalState) throw error;
      sizes.set(shard.name, { error: errorGist(error) });
    }
  }
  return sizes;
}

/** The gist of a failure for a row of `list`: wrangler's error text, or the first line. */
function errorGist(error: unknown): string {
  const message = error instanceof Error ? error.message : String(error);
  const jsonError = /"text":\s*"((?:[^"\\]|\\.)*)"/.exec(message)?.[1];
  if (jsonError !== undefined) return JSON.parse(`"${jsonError}"`) as string;
  const lines = message.split("\n").map((line) => line.trim()).filter((line) => line !== "" && !/^wrangler .* failed:$/.test(line));
  return (lines.find((line) => line.includes("[ERROR]")) ?? lines[0] ?? message).replace(/^✘ \[ERROR\] /, "");
}

function relative(file: string): string {
  return path.relative(PROJECT_ROOT, file) || file;
}
