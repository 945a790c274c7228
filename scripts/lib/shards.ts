/**
 * The shards as the two Workers' wrangler configs declare them (docs/api.md#shards): read from the
 * `[[d1_databases]]` blocks whose binding is `DB_<NAME>`, and a new block written after the last
 * of them, with the files' comments and layout left as they are. The configs are ours, so this
 * reads only the form they use: one `[[d1_databases]]` table per database, one `key = "value"`
 * line per field.
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
import { PROJECT_ROOT, type Target } from "./wrangler.ts";

/** A shard as a config declares it: the shard, and the D1 database its binding names. */
export interface ConfigShard extends ShardBase {
  database_name: string;
  database_id: string;
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
  return { dir: root, api: path.join(root, "wrangler.toml"), notifier: path.join(root, "src/notifier/wrangler.toml") };
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
  const local = (file: string) => file.replace(/\.toml$/, ".local.toml");
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
    `# Generated from ${path.basename(file)} and shards.local.json by the scripts: edit those, not this.\n` +
    "# Undo a local shard: delete shards.local.json and every wrangler.local.toml (see README).\n";
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

interface Block {
  /** Index of the `[[d1_databases]]` line. */
  header: number;
  /** Index of the block's last `key = value` line. */
  last: number;
  fields: Record<string, string>;
}

const TABLE_HEADER = /^\s*\[/;
const D1_HEADER = /^\s*\[\[\s*d1_databases\s*\]\]\s*(#.*)?$/;
const FIELD = /^\s*([A-Za-z0-9_-]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|'([^']*)')\s*(#.*)?$/;

function d1Blocks(lines: readonly string[]): Block[] {
  const blocks: Block[] = [];
  for (let i = 0; i < lines.length; i += 1) {
    if (!D1_HEADER.test(lines[i]!)) continue;
    const block: Block = { header: i, last: i, fields: {} };
    for (let j = i + 1; j < lines.length && !TABLE_HEADER.test(lines[j]!); j += 1) {
      const match = FIELD.exec(lines[j]!);
      if (!match) continue;
      block.fields[match[1]!] = match[2] !== undefined ? JSON.parse(`"${match[2]}"`) as string : match[3]!;
      block.last = j;
    }
    blocks.push(block);
  }
  return blocks;
}

function shardOfBlock(block: Block, file: string): ConfigShard | undefined {
  const binding = block.fields.binding;
  const name = binding === undefined ? undefined : shardNameOfBinding(binding);
  if (!name || !binding) return undefined;
  const { database_name, database_id, migrations_dir } = block.fields;
  if (!database_name || !database_id) {
    throw new Error(`${file}: the [[d1_databases]] block of ${binding} lacks database_name or database_id.`);
  }
  return { ...shardNamed(name), database_name, database_id, migrations_dir };
}

/** The shards a config's text declares, ordered by name as the Workers order them. */
export function shardsOfConfigText(text: string, file = "wrangler.toml"): ConfigShard[] {
  return d1Blocks(text.split("\n"))
    .flatMap((block) => shardOfBlock(block, file) ?? [])
    .sort((a, b) => a.name.localeCompare(b.name));
}

/** The shards of a config file. */
export function readShards(file: string): ConfigShard[] {
  return shardsOfConfigText(readFileSync(file, "utf8"), file);
}

/**
 * The config's text with a `[[d1_databases]]` block for a new shard after the last shard's block,
 * with that block's migrations_dir (each config names the migrations relative to itself).
 */
export function withShardBlock(text: string, shard: { name: string; database_id: string }, file = "wrangler.toml"): string {
  const lines = text.split("\n");
  const shardBlocks = d1Blocks(lines).filter((block) => shardOfBlock(block, file));
  const after = shardBlocks.at(-1);
  if (!after) throw new Error(`${file} declares no shard ([[d1_databases]] with a DB_<NAME> binding) to add one after.`);
  const block = [
    "",
    "[[d1_databases]]",
    `binding = "${shardBinding(shard.name)}"`,
    `database_name = "${shardDatabaseName(shard.name)}"`,
    `database_id = "${shard.database_id}"`,
    ...(after.fields.migrations_dir === undefined ? [] : [`migrations_dir = ${JSON.stringify(after.fields.migrations_dir)}`]),
  ];
  lines.splice(after.last + 1, 0, ...block);
  return lines.join("\n");
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
