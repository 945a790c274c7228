/**
 * SQL on the shards' D1 databases for the operator scripts, values bound both ways: locally
 * in-process on the local state (scripts/lib/local-state.ts), as the Workers bind them; remotely
 * through D1's query API (scripts/lib/d1-remote.ts), which takes the text values as parameters
 * and the rest as literals (`withTextParams` of src/storage/statement.ts). Neither puts a value
 * in a command line.
 */
import type { Statement } from "../../src/storage/statement.ts";
import { remoteD1 } from "./d1-remote.ts";
import { NoLocalState, localState } from "./local-state.ts";
import { localConfigPaths, type ConfigShard } from "./shards.ts";
import type { Target } from "./wrangler.ts";

/** Runs statements on one shard as one batch and returns each statement's rows. */
export async function execute<Row>(target: Target, shard: ConfigShard, statements: readonly Statement[]): Promise<Row[][]> {
  const results = target.remote
    ? await remoteD1().batch<Row>(shard, statements)
    : await localState(target, shard.config ?? localConfigPaths().api).batch<Row>(shard, statements);
  return results.map(({ results: rows }) => rows);
}

/** A shard that failed during a command that goes on with the others. */
export interface ShardFailure {
  shard: string;
  message: string;
}

/**
 * Runs `action` on each shard in turn; a shard that fails is reported, not in the others' way. A
 * local state without tables ends the command with the one line that says what to run first.
 */
export async function onEachShard(list: readonly ConfigShard[], action: (shard: ConfigShard) => Promise<void>): Promise<ShardFailure[]> {
  const failures: ShardFailure[] = [];
  for (const shard of list) {
    try {
      await action(shard);
    } catch (error) {
      if (error instanceof NoLocalState) throw error;
      failures.push({ shard: shard.name, message: `Shard ${shard.name}: ${(error as Error).message}` });
    }
  }
  return failures;
}
