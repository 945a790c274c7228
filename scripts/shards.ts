/**
 * Operators list the shards, close and open them, and add one (docs/operations.md#shards). The
 * shards are the `DB_<NAME>` D1 bindings of wrangler.jsonc; a shard's state is the KV record
 * `shard:<name>` in SHARD_STATES (src/storage/shard-states.ts), which the API Worker reads at
 * most once a minute, so open and close need no deploy. The commands are
 * scripts/lib/shard-commands.ts.
 */
import { runCommands } from "./lib/cli.ts";
import { SHARDS_USAGE, shardCommands } from "./lib/shard-commands.ts";
import { shardStatesOf } from "./lib/shard-states.ts";

await runCommands(SHARDS_USAGE, shardCommands(shardStatesOf));
