/**
 * `npm run types`: generates each Worker's binding types from its wrangler.jsonc (`wrangler types`
 * with `--include-runtime=false`) into a .d.ts at the repository's root, as Cloudflare's templates
 * keep it: worker-configuration.d.ts for the API and notifier-configuration.d.ts for the notifier.
 * src/shared/env.ts derives the Workers' env from them. The runtime's own types come from
 * `@cloudflare/workers-types` (tsconfig.json), so that `src/` holds only what the team wrote.
 * That package types the newest stable runtime as of the date in its version, not a
 * compatibility_date (version 5 has no dated entries): keep its date at or past the configs' when
 * bumping either, or the types lack what the runtime offers.
 * `npm run types -- --check` fails when a file is stale, which `npm run typecheck` runs first, so
 * a config changed without regenerating is caught.
 *
 * One command for both Workers, so that whoever changes a config (a merge adding a binding among
 * them) reruns just this.
 */
import { spawnSync } from "node:child_process";
import path from "node:path";

const ROOT = path.resolve(import.meta.dirname, "..");

const WORKERS = [
  { config: "wrangler.jsonc", out: "worker-configuration.d.ts", envInterface: "ApiBindings" },
  { config: "src/notifier/wrangler.jsonc", out: "notifier-configuration.d.ts", envInterface: "NotifierBindings" },
];

const extra = process.argv.slice(2);
let failed = false;
for (const { config, out, envInterface } of WORKERS) {
  const args = [
    "types",
    out,
    "-c",
    config,
    "--env-interface",
    envInterface,
    // config.ts reads vars as strings and checks them itself; literal types would tie the code to
    // wrangler.jsonc's example values.
    "--strict-vars=false",
    "--include-runtime=false",
    // Without this, wrangler adds every secret of a local .dev.vars, and each machine would
    // generate different files; config.ts declares the secrets.
    "--env-file",
    "/dev/null",
    ...extra,
  ];
  const result = spawnSync("wrangler", args, {
    cwd: ROOT,
    stdio: ["ignore", "pipe", "inherit"],
    encoding: "utf8",
    env: { ...process.env, WRANGLER_SEND_METRICS: "false", NO_COLOR: "1" },
  });
  if (result.status !== 0) {
    failed = true;
    process.stderr.write(result.stdout);
    if (extra.includes("--check")) process.stderr.write(`${out} is out of date with ${config}: run \`npm run types\` and commit it.\n`);
  }
}
process.exit(failed ? 1 : 0);
