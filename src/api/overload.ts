/**
 * An overloaded shard answers, not fails (docs/api.md#shards, "Faults"): D1's overload or busy
 * error on add or delete is a 503 with Retry-After the till retries, and an error line of its
 * own, `"event":"shard-overloaded"` naming the shard, that an alert matches.
 */
import { logLine } from "../shared/log.ts";
import { ShardOverloadedError } from "../storage/transient.ts";
import { REFUSALS, refuse } from "./refusals.ts";

/** Rethrows `error`, as the 503 refusal when it is a shard's overload. */
export function overloadRefused(route: "add" | "delete"): (error: unknown) => never {
  return (error) => {
    if (!(error instanceof ShardOverloadedError)) throw error;
    logLine("error", "shard-overloaded", { shard: error.shard, route, outcome: `${route} refused with 503: the shard is overloaded or busy` });
    throw refuse(REFUSALS.shardOverloaded, error.message);
  };
}
