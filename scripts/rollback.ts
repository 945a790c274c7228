/**
 * `npm run rollback` (docs/operations.md "Rollout and rollback"): both Workers back at once to the
 * version that served all traffic before the current release, the API Worker first (it stops
 * writing what the new notifier reads), whatever share a rollout had reached.
 */
import path from "node:path";
import { UsageError, parse, runCli } from "./lib/cli.ts";
import { readConfigFile } from "./lib/config.ts";
import { rollbackTarget, type Deployment } from "./lib/rollout.ts";
import { PROJECT_ROOT, wrangler } from "./lib/wrangler.ts";

const USAGE = `Usage: npm run rollback -- [--message <why>]

  Puts the API Worker, then the notifier, back on the version that served all their traffic
  before the current release (during a rollout's split: the version it started from), at once.
  Migrations are not undone: every migration keeps what the previous code reads
  (npm run check-migrations), so the previous version runs on the new schema.`;

await runCli(USAGE, (argv) => {
  const { values, positionals } = parse(argv, { message: { type: "string" } });
  if (positionals.length > 0) throw new UsageError(`Unexpected argument: ${positionals[0]}`);
  for (const file of ["wrangler.jsonc", "src/notifier/wrangler.jsonc"]) {
    const name = String(readConfigFile(path.join(PROJECT_ROOT, file)).name);
    const deployments = JSON.parse(wrangler(["deployments", "list", "--json", "-c", file])) as Deployment[];
    const target = rollbackTarget(deployments);
    if (!target) {
      console.log(`${name}: no earlier version served all traffic; left as it is.`);
      continue;
    }
    wrangler(["rollback", target, "-y", "-c", file, "--message", values.message ?? "npm run rollback"]);
    console.log(`${name}: back on ${target}.`);
  }
});
