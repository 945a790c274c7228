/**
 * The shards as the two Workers' wrangler configs declare them (docs/api.md#shards): read from the
 * `d1_databases` entries whose binding is `DB_<NAME>`, and a new entry written after the last of
 * them, with the files' comments and layout left as they are (a JSONC edit, scripts/lib/config.ts).
 */
import { existsSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import path from "node:path";
import {
  SHARD_NAME_PATTERN,
  shardBinding,
  shardNameOfBinding,
  shardNamed,
  shardTag,
  type ShardBase,
} from "../../src/shared/shard-ids.ts";
import { UsageError } from "./cli.ts";
import { editConfigText, parseConfigText } from "./config.ts";
import { PROJECT_ROOT, type Target } from "./wrangler.ts";

/** A shard as a config declares it: the shard, and the D1 database its binding names. */
export interface ConfigShard extends ShardBase {
  database_name: string;
  /** The account's database; none in the committed configs until `npm run deploy` writes it. */
  database_id?: string;
  migrations_dir?: string;
  tag: number;
  /** The config that binds it, for wrangler's -c; set by {@link targetShards}. */
  config?: string;
}

/** The two Workers' configs under a project directory (the project root unless tests say otherwise). */
export interface ConfigPaths {
  dir: string;
  api: string;
  notifier: string;
}

/** The committed configs: what is deployed, and what the tests read. */
export function configPaths(dir: string = PROJECT_ROOT): ConfigPaths {
  const root = path.resolve(PROJECT_ROOT, dir);
  return { dir: root, api: path.join(root, "wrangler.jsonc"), notifier: path.join(root, "src/notifier/wrangler.jsonc") };
}

/**
 * A shard added locally only (`npm run shards -- add` without --remote). These are kept out of
 * the committed configs, which the test suite reads, in this git-ignored file beside them.
 */
export interface LocalShard {
  name: string;
  database_id: string;
}

/** The git-ignored list of locally added shards, in the project directory. */
export function localShardsFile(dir: string = PROJECT_ROOT): string {
  return path.join(configPaths(dir).dir, "shards.local.json");
}

/** The git-ignored configs local tools run with when shards were added locally, beside the committed ones. */
export function localConfigFiles(dir: string = PROJECT_ROOT): ConfigPaths {
  const { dir: root, api, notifier } = configPaths(dir);
  const local = (file: string) => file.replace(/\.jsonc$/, ".local.jsonc");
  return { dir: root, api: local(api), notifier: local(notifier) };
}

/** The shards added locally, oldest first; none without the file. */
export function readLocalShards(dir: string = PROJECT_ROOT): LocalShard[] {
  const file = localShardsFile(dir);
  return existsSync(file) ? (JSON.parse(readFileSync(file, "utf8")) as LocalShard[]) : [];
}

/**
 * The configs the local tools (`npm start`, the operator scripts without --remote) run with: the
 * committed ones, or, once a shard was added locally, generated copies beside them that also bind
 * the local shards. Each copy is brought up to date here, so a change to a committed config
 * reaches it, and written only when it changes, since `wrangler dev` reloads on every write.
 */
export function localConfigPaths(dir: string = PROJECT_ROOT): ConfigPaths {
  const committed = configPaths(dir);
  const shards = readLocalShards(dir);
  if (shards.length === 0) return committed;
  const local = localConfigFiles(dir);
  replaceIfChanged(local.notifier, configWithShards(committed.notifier, shards));
  replaceIfChanged(local.api, configWithShards(committed.api, shards));
  return local;
}

/**
 * The shards an operator command acts on: the deployment's, or locally those of the configs
 * `npm start` runs with, local shards included. Each names the config that binds it, since
 * wrangler finds a database only through a config.
 */
export function targetShards(target: Target, dir?: string): ConfigShard[] {
  const { api } = target.remote ? configPaths(dir) : localConfigPaths(dir);
  return readShards(api).map((shard) => ({ ...shard, config: api }));
}

/** A committed config's text with a block for each of these shards. */
export function configWithShards(file: string, shards: readonly LocalShard[]): string {
  const header =
    `// Generated from ${path.basename(file)} and shards.local.json by the scripts: edit those, not this.\n` +
    "// Undo a local shard: delete shards.local.json and every wrangler.local.jsonc (see README).\n";
  return header + shards.reduce((text, shard) => withShardBlock(text, shard, file), readFileSync(file, "utf8"));
}

/**
 * Writes `file` through a rename, so that a `wrangler dev` watching it never reads half a file;
 * leaves it alone when it already holds `text`.
 */
export function replaceIfChanged(file: string, text: string): void {
  if (existsSync(file) && readFileSync(file, "utf8") === text) return;
  const next = `${file}.next`;
  writeFileSync(next, text);
  renameSync(next, file);
}

/** The name every shard's D1 database has: `receipts-v2-<name>`. */
export function shardDatabaseName(name: string): string {
  return `receipts-v2-${name}`;
}

/** Checks a shard name given on the command line; a name no shard can have is a UsageError. */
export function shardNameArgument(value: string | undefined): string {
  if (value === undefined) throw new UsageError("No shard name given.");
  if (!SHARD_NAME_PATTERN.test(value)) {
    throw new UsageError(
      `Not a shard name: ${JSON.stringify(value)} (a lower-case letter, then up to 19 lower-case letters or digits).`,
    );
  }
  return value;
}

interface D1Entry {
  binding?: unknown;
  database_name?: unknown;
  database_id?: unknown;
  migrations_dir?: unknown;
}

/** The `d1_databases` entries of a config's text; a config that is not JSONC is an error naming the file. */
function d1Entries(text: string, file: string): D1Entry[] {
  const config = parseConfigText(text, file);
  return Array.isArray(config.d1_databases) ? (config.d1_databases as D1Entry[]) : [];
}

function shardOfEntry(entry: D1Entry, file: string): ConfigShard | undefined {
  const binding = typeof entry.binding === "string" ? entry.binding : undefined;
  const name = binding === undefined ? undefined : shardNameOfBinding(binding);
  if (!name || !binding) return undefined;
  const { database_name, database_id, migrations_dir } = entry;
  if (typeof database_name !== "string") throw new Error(`${file}: the d1_databases entry of ${binding} lacks database_name.`);
  return {
    ...shardNamed(name),
    database_name,
    ...(typeof database_id === "string" ? { database_id } : {}),
    ...(typeof migrations_dir === "string" ? { migrations_dir } : {}),
  };
}

/** The shards a config's text declares, ordered by name as the Workers order them. */
export function shardsOfConfigText(text: string, file = "wrangler.jsonc"): ConfigShard[] {
  return d1Entries(text, file)
    .flatMap((entry) => shardOfEntry(entry, file) ?? [])
    .sort((a, b) => a.name.localeCompare(b.name));
}

/** The shards of a config file. */
export function readShards(file: string): ConfigShard[] {
  return shardsOfConfigText(readFileSync(file, "utf8"), file);
}

/**
 * The config's text with a `d1_databases` entry for a new shard after the last shard's entry,
 * with that entry's migrations_dir (each config names the migrations relative to itself); the
 * file's comments and layout stay as they are.
 */
export function withShardBlock(text: string, shard: { name: string; database_id: string }, file = "wrangler.jsonc"): string {
  const entries = d1Entries(text, file);
  const last = entries.findLastIndex((entry) => shardOfEntry(entry, file));
  if (last < 0) throw new Error(`${file} declares no shard (a d1_databases entry with a DB_<NAME> binding) to add one after.`);
  const { migrations_dir } = entries[last]!;
  const entry = {
    binding: shardBinding(shard.name),
    database_name: shardDatabaseName(shard.name),
    database_id: shard.database_id,
    ...(typeof migrations_dir === "string" ? { migrations_dir } : {}),
  };
  return editConfigText(text, ["d1_databases", last + 1], entry, { insert: true });
}

/**
 * Why a shard name cannot be added next to these shards, or undefined when it can: it exists
 * already, or its 12-bit tag, which every receipt_id and event_id carries, is another shard's.
 */
export function addConflict(name: string, existing: readonly ConfigShard[]): string | undefined {
  const same = existing.find(
    (shard) => shard.name === name || shard.database_name === shardDatabaseName(name),
  );
  if (same) return `Shard ${name} exists already (binding ${same.binding}, database ${same.database_name}).`;
  const tag = shardTag(name);
  const clash = existing.find((shard) => shard.tag === tag);
  if (clash) {
    return `Shard name ${name} has the ID tag 0x${tag.toString(16).padStart(3, "0")} of shard ${clash.name}; pick another name.`;
  }
  return undefined;
}

/**
 * The receipt count and the database size from `wrangler d1 execute --remote --json --command
 * "SELECT COUNT(*) AS n FROM receipts"`: one result whose meta carries D1's `size_after`.
 */
export function countAndSize(output: string): { receipts: number; bytes: number } {
  const parsed = JSON.parse(output) as { results?: { n?: unknown }[]; meta?: { size_after?: unknown } }[];
  const result = Array.isArray(parsed) ? parsed.at(-1) : undefined;
  const receipts = result?.results?.[0]?.n;
  const bytes = result?.meta?.size_after;
  if (typeof receipts !== "number" || typeof bytes !== "number") {
    throw new Error(`unexpected output of wrangler d1 execute: ${output.slice(0, 300)}`);
  }
  return { receipts, bytes };
}

/** The database_id that `wrangler d1 create` printed in its config snippet (TOML or JSON). */
export function createdDatabaseId(output: string): string {
  const match = /database_id"?\s*[=:]\s*"([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})"/i.exec(output);
  if (!match) throw new Error(`wrangler d1 create printed no database_id:\n${output}`);
  return match[1]!;
}
