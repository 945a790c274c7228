/**
 * SQL on the shards' D1 databases for the operator scripts: locally in-process on the local state
 * (scripts/lib/local-state.ts), values bound as the Workers bind them; remotely through `wrangler
 * d1 execute`, which runs all the statements of one command as one batch and takes no bind
 * parameters: values go in as literals that cannot alter the SQL (`inlined` of
 * src/storage/statement.ts).
 */
import { inlined, type Statement } from "../../src/storage/statement.ts";
import { NoLocalState, localState } from "./local-state.ts";
import { localConfigPaths, type ConfigShard } from "./shards.ts";
import { targetFlags, wrangler, type Target } from "./wrangler.ts";

/** Runs statements on one shard as one batch and returns each statement's rows. */
export async function execute<Row>(target: Target, shard: ConfigShard, statements: readonly Statement[]): Promise<Row[][]> {
  if (!target.remote) {
    const results = await localState(target, shard.config ?? localConfigPaths().api).batch<Row>(shard, statements);
    return results.map(({ results: rows }) => rows);
  }
  const command = statements.map(inlined).join(";\n");
  const config = shard.config === undefined ? [] : ["-c", shard.config];
  const output = wrangler(["d1", "execute", shard.database_name, "--json", "--command", command, ...config, ...targetFlags(target)]);
  return (JSON.parse(output) as { results: Row[] }[]).map(({ results }) => results);
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
