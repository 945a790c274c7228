/**
 * The shards of a throwaway local state (wrangler's --persist-to), as the operator-script tests
 * set them up and look into them: in-process, on the local state the commands open.
 */
import { cpSync } from "node:fs";
import path from "node:path";
import { inject } from "vitest";
import { localState } from "../../scripts/lib/local-state.ts";
import { readShards } from "../../scripts/lib/shards.ts";
import { statement } from "../../src/storage/statement.ts";
import { ROOT } from "./run-script.ts";

/** The D1 databases of wrangler.jsonc's two shards. */
export const LOCAL_SHARDS = ["s1", "s2"] as const;

declare module "vitest" {
  interface ProvidedContext {
    /** In the "node" project: a local state whose shards are migrated, for a test file to copy. */
    migratedState: string;
  }
}

/**
 * Gives a fresh local state both shards, migrated: a copy of the ones the node project's global
 * setup migrated once (test/support/migrated-state.ts), as `wrangler d1 migrations apply` leaves
 * them.
 */
export function migrateLocalShards(state: string): void {
  cpSync(inject("migratedState"), state, { recursive: true });
}

/**
 * Runs SQL (one statement) on a shard of a local state (bound by `config`, the project's by
 * default) in this process, on the local state the operator commands run in-process open
 * (scripts/lib/local-state.ts); returns its rows. `closeLocalStates` ends it.
 */
export async function localD1(state: string, shard: string, sql: string, config = path.join(ROOT, "wrangler.jsonc")): Promise<Record<string, unknown>[]> {
  const configShard = readShards(config).find((each) => each.name === shard);
  if (!configShard) throw new Error(`no shard ${shard} in ${config}`);
  const [result] = await localState({ remote: false, persistTo: state }, config).batch<Record<string, unknown>>(configShard, [statement(sql)]);
  return result!.results;
}
