/**
 * Makes the API Worker's keys. `new` prints a fresh token signing key set (docs/api.md#login);
 * with `--from` it puts a new signing key in front of an existing set, so tokens signed by the old
 * keys keep verifying until the operator drops them: for `wrangler secret put TOKEN_KEYS`.
 * `audit` prints a fresh AUDIT_HASH_KEY (docs/api.md#erasure). `files` writes the secrets files
 * `npm run deploy` uploads: every secret both Workers need, fresh, in files only the operator reads.
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { newAuditHashKey } from "../src/shared/audit-hash-key.ts";
import { parseTokenKeys } from "../src/shared/config.ts";
import { newTokenKey } from "../src/shared/token-keys.ts";
import { UsageError, parse, runCommands } from "./lib/cli.ts";
import { newPushSecret } from "./lib/dev-vars.ts";

const USAGE = `Usage: npm run keys -- new [--from <file>|-] | audit | files --push-url <url> [--dir <dir>]

  new                  print a fresh token key set: {"keys":[{kty, kid, alg, k}]}
  new --from <file>    print the set in <file> (or standard input for -) with a new
                       first key, which signs from then on; the others still verify
  audit                print a fresh AUDIT_HASH_KEY, the key of the hash that stands for
                       an erased app user in the audit trail; set it once, never change it
  files                write the secrets files npm run deploy uploads, each readable by you
                       alone: <dir>/api.json (TOKEN_KEYS, AUDIT_HASH_KEY) and <dir>/notifier.json
                       (APP_PUSH_URL, the app push service's push address, and APP_PUSH_SECRET,
                       its whsec_ signing secret, to hand to the app side); <dir> is .secrets
                       by default. Never overwrites: keep them, they are the deployment's keys

Then: <output> | npx wrangler secret put TOKEN_KEYS   (or AUDIT_HASH_KEY)`;

await runCommands(USAGE, {
  new(argv) {
    const { values, positionals } = parse(argv, { from: { type: "string" } });
    if (positionals.length > 0) throw new UsageError(`Unexpected argument: ${positionals[0]}`);
    const existing = values.from === undefined ? [] : readKeySet(values.from);
    console.log(JSON.stringify({ keys: [newTokenKey(), ...existing] }));
  },
  files(argv) {
    const { values, positionals } = parse(argv, { "push-url": { type: "string" }, dir: { type: "string" } });
    if (positionals.length > 0) throw new UsageError(`Unexpected argument: ${positionals[0]}`);
    const pushUrl = values["push-url"];
    if (!pushUrl || !URL.canParse(pushUrl) || new URL(pushUrl).protocol !== "https:") {
      throw new UsageError("--push-url takes the app push service's https:// address that the notifier delivers to.");
    }
    const dir = path.resolve(values.dir ?? ".secrets");
    const files = { "api.json": { TOKEN_KEYS: JSON.stringify({ keys: [newTokenKey()] }), AUDIT_HASH_KEY: newAuditHashKey() }, "notifier.json": { APP_PUSH_URL: pushUrl, APP_PUSH_SECRET: newPushSecret() } };
    const existing = Object.keys(files).filter((file) => existsSync(path.join(dir, file)));
    if (existing.length > 0) throw new Error(`${existing.map((file) => path.join(dir, file)).join(" and ")} exist already: they hold the deployment's keys, so nothing was written.`);
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    for (const [file, secrets] of Object.entries(files)) writeFileSync(path.join(dir, file), `${JSON.stringify(secrets, null, 2)}\n`, { mode: 0o600, flag: "wx" });
    console.log(`Wrote ${Object.keys(files).map((file) => path.join(dir, file)).join(" and ")} (readable by you alone). Keep them with the deployment's other keys;
npm run deploy uploads them. The app side needs APP_PUSH_SECRET from notifier.json to verify each push.`);
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
