/**
 * `npm start`: everything a newcomer needs to run the service locally (docs/api.md#local-use). Applies the
 * local D1 migrations to every shard, writes each Worker's `.dev.vars` (or the settings it lacks), then serves both Workers in
 * one `wrangler dev`, so the queue flows between them. Arguments after `--` go to wrangler dev.
 */
import { spawn } from "node:child_process";
import path from "node:path";
import { createInterface } from "node:readline";
import type { Readable, Writable } from "node:stream";
import { newAuditHashKey } from "../src/shared/audit-hash-key.ts";
import { PATHS } from "../src/shared/paths.ts";
import { readConfigFile } from "./lib/config.ts";
import { devOutputFilter, migrationSummary, untilServing, withTypesAdvice, withWorkerName } from "./lib/dev-output.ts";
import { ensureDevVars, newPushSecret } from "./lib/dev-vars.ts";
import { localConfigPaths, readShards } from "./lib/shards.ts";
import { recordStart, stateDirectory } from "./lib/start-record.ts";
import { PROJECT_ROOT, wrangler } from "./lib/wrangler.ts";
import { newTokenKey } from "../src/shared/token-keys.ts";

// The committed configs, or their git-ignored local copies once `npm run shards -- add` added a
// shard locally.
const { api: API_CONFIG, notifier: NOTIFIER_CONFIG } = localConfigPaths();
const API_NAME = String(readConfigFile(API_CONFIG).name);

const extra = process.argv.slice(2);
const port = flagValue(extra, "--port") ?? "8787";
const host = flagValue(extra, "--ip") ?? "127.0.0.1";
// A state directory given for wrangler dev must get the migrations too, or it serves no tables.
const persistTo = flagValue(extra, "--persist-to");

ensureSettings(".dev.vars", "# Local settings of the API Worker; never commit this file.\n", {
  TOKEN_KEYS: () => JSON.stringify({ keys: [newTokenKey()] }),
  // The key of the hash that stands for an app user in erasure fences and, once erased, in the audit trail.
  AUDIT_HASH_KEY: newAuditHashKey,
});
ensureSettings(
  path.relative(PROJECT_ROOT, path.join(path.dirname(NOTIFIER_CONFIG), ".dev.vars")),
  "# Local settings of the notifier Worker; never commit this file.\n" +
    "# With APP_PUSH_URL empty the notifier logs each notice as one JSON line; to push to a local\n" +
    "# receiver (npm run receiver) set it to its address, such as 'http://127.0.0.1:9999/push'.\n",
  // Empty, yet present: the config requires it (secrets.required), and wrangler dev warns of a
  // required secret that .dev.vars lacks.
  { APP_PUSH_URL: () => "", APP_PUSH_SECRET: newPushSecret },
);

for (const shard of readShards(API_CONFIG)) {
  const output = wrangler([
    "d1",
    "migrations",
    "apply",
    shard.binding,
    "--local",
    "-c",
    API_CONFIG,
    ...(persistTo ? ["--persist-to", persistTo] : []),
  ]);
  console.log(migrationSummary(`${shard.name} (${shard.binding})`, output));
}

console.log(`\nreceipts.v2 is starting at http://${host}:${port}; the next steps follow once it serves.\n`);

const dev = spawn(
  "wrangler",
  [
    "dev",
    "-c",
    API_CONFIG,
    "-c",
    NOTIFIER_CONFIG,
    "--ip",
    host,
    "--port",
    port,
    "--test-scheduled",
    ...withoutFlags(extra, ["--port", "--ip"]),
  ],
  // Piped, not inherited, so that the lines repeated every minute can be left out.
  { cwd: PROJECT_ROOT, stdio: ["inherit", "pipe", "pipe"] },
);
// The commands that talk to npm start (app-users, jobs, archive run) look for its port here.
const forgetStart = recordStart(stateDirectory(persistTo), Number(port));
showLines(dev.stdout!, process.stdout);
showLines(dev.stderr!, process.stderr);

// The first steps only once the API Worker answers: wrangler prints its address well before
// the Workers run, and a login copied at once met "connection refused".
const starting = new AbortController();
untilServing(`http://${host}:${port}${PATHS.openapi}`, { signal: starting.signal }).then(
  () =>
    console.log(`
receipts.v2 serves at http://${host}:${port}

Issue a client:
  npm run clients -- issue --chain c1
Log in with it:
  curl -s -X POST http://${host}:${port}${PATHS.login} \\
    -H "client_id: <client_id>" -H "client_secret: <client_secret>" \\
    -H "token_type: Bearer" -H "scope: service.pos"
`),
  // Stopped before it served.
  () => undefined,
);

// wrangler dev never fires cron triggers, so the API Worker's every-minute jobs (the re-send of
// notices whose queue send failed among them) are triggered here, as the deployed trigger would.
const CRON_URL = `http://${host}:${port}/cdn-cgi/handler/scheduled?cron=${encodeURIComponent("* * * * *")}`;
const cronTicker = setInterval(() => {
  fetch(CRON_URL).then(
    (response) => response.body?.cancel(),
    // Not listening yet, or shutting down: the next minute tries again.
    () => undefined,
  );
}, 60_000);

// wrangler dev ends both workerd processes itself when signalled. npm start reaches this process
// through `exec` (package.json): npm passes a SIGTERM sent to it alone only to its own child.
for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.on(signal, () => {
    clearInterval(cronTicker);
    starting.abort();
    dev.kill(signal);
  });
}
dev.on("exit", (code) => {
  clearInterval(cronTicker);
  starting.abort();
  forgetStart();
  process.exit(code ?? 0);
});

/** Copies `from` to `to` line by line, without the routine lines (scripts/lib/dev-output.ts). */
function showLines(from: Readable, to: Writable): void {
  const show = devOutputFilter(API_NAME);
  createInterface({ input: from, crlfDelay: Infinity }).on("line", (line) => {
    if (show(line)) to.write(`${withTypesAdvice(withWorkerName(line, API_NAME))}\n`);
  });
}

function ensureSettings(relative: string, header: string, settings: Record<string, () => string>): void {
  const written = ensureDevVars(path.join(PROJECT_ROOT, relative), header, settings);
  if (written.length > 0) console.log(`Wrote ${written.join(", ")} to ${relative} (fresh local secrets).`);
}

function flagValue(args: string[], flag: string): string | undefined {
  const index = args.indexOf(flag);
  if (index >= 0) return args[index + 1];
  return args.find((arg) => arg.startsWith(`${flag}=`))?.slice(flag.length + 1);
}

function withoutFlags(args: string[], flags: string[]): string[] {
  const kept: string[] = [];
  for (let i = 0; i < args.length; i += 1) {
    const arg = args[i]!;
    if (flags.includes(arg)) i += 1;
    else if (!flags.some((flag) => arg.startsWith(`${flag}=`))) kept.push(arg);
  }
  return kept;
}
