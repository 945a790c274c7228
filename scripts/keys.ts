/**
 * Makes token signing keys (docs/api.md#login). `new` prints a fresh key set; with `--from` it puts a
 * new signing key in front of an existing set, so tokens signed by the old keys keep verifying
 * until the operator drops them. The output is for `wrangler secret put TOKEN_KEYS`.
 */
import { readFileSync } from "node:fs";
import { parseTokenKeys } from "../src/api/config.ts";
import { newTokenKey } from "../src/shared/token-keys.ts";
import { UsageError, parse, runCli } from "./lib/cli.ts";

const USAGE = `Usage: npm run keys -- new [--from <file>|-]

  new                  print a fresh key set: {"keys":[{kty, kid, alg, k}]}
  new --from <file>    print the set in <file> (or standard input for -) with a new
                       first key, which signs from then on; the others still verify

Then: <output> | npx wrangler secret put TOKEN_KEYS`;

await runCli(USAGE, (argv) => {
  const [command, ...rest] = argv;
  if (command !== "new") throw new UsageError(command ? `Unknown command: ${command}` : "No command given.");
  const { values, positionals } = parse(rest, { from: { type: "string" } });
  if (positionals.length > 0) throw new UsageError(`Unexpected argument: ${positionals[0]}`);
  const existing = values.from === undefined ? [] : readKeySet(values.from);
  console.log(JSON.stringify({ keys: [newTokenKey(), ...existing] }));
});

function readKeySet(source: string): ReturnType<typeof newTokenKey>[] {
  const text = readFileSync(source === "-" ? 0 : source, "utf8");
  try {
    return parseTokenKeys(text).map(({ kid, k }) => ({ kty: "oct", kid, alg: "HS256", k }));
  } catch (error) {
    throw new UsageError(`--from ${source}: ${(error as Error).message}`);
  }
}
