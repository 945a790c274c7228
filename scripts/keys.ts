/**
 * Makes the API Worker's keys. `new` prints a fresh token signing key set (docs/api.md#login);
 * with `--from` it puts a new signing key in front of an existing set, so tokens signed by the old
 * keys keep verifying until the operator drops them: for `wrangler secret put TOKEN_KEYS`.
 * `audit` prints a fresh AUDIT_HASH_KEY (docs/api.md#erasure).
 */
import { readFileSync } from "node:fs";
import { newAuditHashKey } from "../src/shared/audit-hash-key.ts";
import { parseTokenKeys } from "../src/shared/config.ts";
import { newTokenKey } from "../src/shared/token-keys.ts";
import { UsageError, parse, runCommands } from "./lib/cli.ts";

const USAGE = `Usage: npm run keys -- new [--from <file>|-] | audit

  new                  print a fresh token key set: {"keys":[{kty, kid, alg, k}]}
  new --from <file>    print the set in <file> (or standard input for -) with a new
                       first key, which signs from then on; the others still verify
  audit                print a fresh AUDIT_HASH_KEY, the key of the hash that stands for
                       an erased app user in the audit trail; set it once, never change it

Then: <output> | npx wrangler secret put TOKEN_KEYS   (or AUDIT_HASH_KEY)`;

await runCommands(USAGE, {
  new(argv) {
    const { values, positionals } = parse(argv, { from: { type: "string" } });
    if (positionals.length > 0) throw new UsageError(`Unexpected argument: ${positionals[0]}`);
    const existing = values.from === undefined ? [] : readKeySet(values.from);
    console.log(JSON.stringify({ keys: [newTokenKey(), ...existing] }));
  },
  audit(argv) {
    const { positionals } = parse(argv, {});
    if (positionals.length > 0) throw new UsageError(`Unexpected argument: ${positionals[0]}`);
    console.log(newAuditHashKey());
  },
});

function readKeySet(source: string): ReturnType<typeof newTokenKey>[] {
  const text = readFileSync(source === "-" ? 0 : source, "utf8");
  try {
    return parseTokenKeys(text).map(({ kid, k }) => ({ kty: "oct", kid, alg: "HS256", k }));
  } catch (error) {
    throw new UsageError(`--from ${source}: ${(error as Error).message}`);
  }
}
