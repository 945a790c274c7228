/**
 * Operators erase an app user's data in every shard (docs/api.md#erasure, docs/operations.md "A
 * shopper asks to be forgotten"), with the erasure of src/storage/erasure.ts run through
 * `wrangler d1 execute` on each shard of wrangler.toml.
 */
import path from "node:path";
import { parseAuditHashKey } from "../src/shared/audit-hash-key.ts";
import { eraseAppUser } from "../src/storage/erasure.ts";
import type { Statement } from "../src/storage/statement.ts";
import { UsageError, parse, runCommands, usableId } from "./lib/cli.ts";
import { execute } from "./lib/d1.ts";
import { readDevVars } from "./lib/dev-vars.ts";
import { configPaths, targetShards } from "./lib/shards.ts";
import { TARGET_OPTIONS, targetOf, type Target } from "./lib/wrangler.ts";

const USAGE = `Usage: npm run app-users -- erase <app_user_id> [--json] [--remote]

  erase <app_user_id>   erase every receipt of this app user in every shard, with every
                        stored copy of their data (Idempotency-Key answers, events not yet
                        sent, failed notices); their audit records keep a keyed hash in
                        place of the ID; one app_user.erased event goes to the app. Prints
                        the number of receipts erased; with --json
                        {"app_user_id", "receipts_erased"}. Running it again erases 0.
                        An ID that starts with '-' goes after '--':
                        npm run app-users -- erase -- -user-7

The key of the hash is AUDIT_HASH_KEY: taken from the environment, or, locally, from the
.dev.vars that 'npm start' writes. With --remote set it to the API Worker's secret (see
docs/operations.md, "A shopper asks to be forgotten").

Acts on the local state of 'npm start' unless --remote is given (--persist-to <dir> picks
another local state directory).`;

await runCommands(USAGE, { erase });

async function erase(argv: string[]): Promise<void> {
  const { values, positionals } = parse(argv, {
    json: { type: "boolean" },
    ...TARGET_OPTIONS,
  });
  if (positionals.length === 0) throw new UsageError("No app_user_id given.");
  if (positionals.length > 1) throw new UsageError(`Unexpected argument: ${positionals[1]}`);
  // Any app_user_id that add accepts, a leading "-" too: it can only have come after "--".
  const appUserId = usableId("app_user_id", positionals[0]!, { optionLike: true });
  const target = targetOf(values);
  const hashKey = auditHashKey(target);

  const shards = targetShards(target).map((shard) => ({
    ...shard,
    run: async (statements: readonly Statement[]) => execute<unknown>(target, shard, statements),
  }));
  const erasure = await eraseAppUser(appUserId, shards, hashKey);
  if (values.json) {
    console.log(JSON.stringify({ app_user_id: erasure.app_user_id, receipts_erased: erasure.receipts_erased }));
  } else {
    const perShard = Object.entries(erasure.shards).map(([name, count]) => `${name}=${count}`).join(", ");
    console.log(`Erased ${erasure.receipts_erased} receipt${erasure.receipts_erased === 1 ? "" : "s"} of app user ${JSON.stringify(appUserId)} (${perShard}).`);
    console.log(`Event ${erasure.event.event_id} (app_user.erased) goes to the app within a minute.`);
  }
}

/** AUDIT_HASH_KEY from the environment, or locally from the API Worker's .dev.vars. */
function auditHashKey(target: Target): Uint8Array {
  const devVars = path.join(configPaths().dir, ".dev.vars");
  const text = process.env.AUDIT_HASH_KEY ?? (target.remote ? undefined : readDevVars(devVars).AUDIT_HASH_KEY);
  if (text === undefined) {
    throw new Error(
      target.remote
        ? "AUDIT_HASH_KEY is not set: export the API Worker's AUDIT_HASH_KEY secret (docs/operations.md) and run again."
        : "AUDIT_HASH_KEY is not set, nor in .dev.vars: run 'npm start' once, which writes it.",
    );
  }
  return parseAuditHashKey(text);
}
