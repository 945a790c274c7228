/**
 * `npm run types`: generates each Worker's binding types, and the Workers runtime's, from its
 * wrangler.toml (`wrangler types`), into a .d.ts beside its code (api-worker.d.ts and
 * notifier-worker.d.ts, named apart so that no two files under src/ share a name); src/shared/env.ts
 * derives the Workers' env from them. `npm run types -- --check` fails when a file is stale, which
 * `npm run typecheck` runs first, so a config changed without regenerating is caught.
 *
 * One command for both Workers, so that whoever changes a config (a merge adding a binding among
 * them) reruns just this.
 */
import { spawnSync } from "node:child_process";
import path from "node:path";

const ROOT = path.resolve(import.meta.dirname, "..");

const WORKERS = [
  { config: "wrangler.toml", out: "src/api/api-worker.d.ts", envInterface: "ApiBindings", runtime: true },
  // The runtime's types once: both Workers share one TypeScript program and one compatibility date.
  { config: "src/notifier/wrangler.toml", out: "src/notifier/notifier-worker.d.ts", envInterface: "NotifierBindings", runtime: false },
];

const extra = process.argv.slice(2);
let failed = false;
for (const { config, out, envInterface, runtime } of WORKERS) {
  const args = [
    "types",
    out,
    "-c",
    config,
    "--env-interface",
    envInterface,
    // config.ts reads vars as strings and checks them itself; literal types would tie the code to
    // wrangler.toml's example values.
    "--strict-vars=false",
    `--include-runtime=${runtime}`,
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
