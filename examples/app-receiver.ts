/**
 * The app side of receipts.v2's events, as small as it can be while doing what an app must: a
 * local HTTP server that verifies each delivery with the Standard Webhooks reference library,
 * applies it once (examples/app-view.ts), and shows each app user's receipts, so that a person
 * can watch a receipt appear on add and vanish on delete. Given the app push service's client
 * (`npm run clients -- issue --app`), it first catches up through the event feed
 * (examples/app-feed.ts), so that one restarted after missing events shows them.
 *
 *     npm run receiver                       # http://127.0.0.1:9999, or: npm run receiver -- --port 9000
 *     APP_CLIENT_ID=app_... APP_CLIENT_SECRET=... npm run receiver   # catch up from the feed first
 *     # src/notifier/.dev.vars: APP_PUSH_URL='http://127.0.0.1:9999/push', then npm start
 *     curl -s http://127.0.0.1:9999/app-users/user-42/receipts
 *     APP_CLIENT_ID=app_... APP_CLIENT_SECRET=... npm run receiver -- export user-42 --out user-42.ndjson
 *     APP_CLIENT_ID=app_... APP_CLIENT_SECRET=... npm run receiver -- forget user-42
 *
 * - POST (any path): verify the `webhook-*` headers against the body with `APP_PUSH_SECRET`
 *   (401 and nothing applied if they do not match or are older than 5 minutes), apply the event
 *   unless its `webhook-id` was applied before, print one line, answer 204.
 * - GET /app-users/<app_user_id>/receipts: `{"app_user_id", "receipts": [...]}` as JSON.
 *
 * The secret is `APP_PUSH_SECRET` from the environment, else from `src/notifier/.dev.vars` (which
 * `npm start` writes), so the receiver and the local notifier share it with no copying. The feed:
 * `APP_CLIENT_ID` and `APP_CLIENT_SECRET` from the environment (a secret stays out of the process
 * list), the service at `--base-url` (else the local npm start, on the port it recorded), the cursor in `--cursor-file`
 * (.app-receiver-cursor, git-ignored).
 *
 * `export` and `forget` are what an app's backend calls when a shopper asks for a copy of their
 * data or to be forgotten (examples/app-jobs.ts): with the same app client, they start the job,
 * follow it to its end, and print the export's file (or write it to `--out`) or the erasure's
 * count and instant, then exit.
 */
import { readFileSync, writeFileSync } from "node:fs";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import path from "node:path";
import { parseArgs, parseEnv } from "node:util";
import { Webhook, WebhookVerificationError } from "standardwebhooks";
import { asksForHelp } from "../scripts/lib/cli.ts";
import { localServiceUrl, stateDirectory } from "../scripts/lib/start-record.ts";
import { catchUp, type AppClient, type FeedSource } from "./app-feed.ts";
import { exportUser, forgetUser, type JobPolling } from "./app-jobs.ts";
import { AppView, describeOutcome, MalformedEvent } from "./app-view.ts";

/** Where `npm start` keeps the notifier's local settings, APP_PUSH_SECRET among them. */
export const NOTIFIER_DEV_VARS = path.join(import.meta.dirname, "../src/notifier/.dev.vars");

const DEFAULT_PORT = 9999;
const DEFAULT_CURSOR_FILE = path.join(import.meta.dirname, "../.app-receiver-cursor");
/** Far above any event: a receipt body is at most 64 KiB (docs/api.md#add-body). */
const MAX_BODY_BYTES = 1024 * 1024;
const USAGE =
  "Usage: npm run receiver [-- --port <port>] [--base-url <url> | --persist-to <dir>] [--cursor-file <file>]\n" +
  "       npm run receiver -- export <app_user_id> [--out <file>] [--base-url <url> | --persist-to <dir>]\n" +
  "       npm run receiver -- forget <app_user_id> [--base-url <url> | --persist-to <dir>]\n" +
  "  The service is the local npm start of .wrangler/state (or --persist-to's state), on the port it\n" +
  "  recorded, unless --base-url names another.\n" +
  "  APP_PUSH_SECRET from the environment or src/notifier/.dev.vars; APP_CLIENT_ID and APP_CLIENT_SECRET\n" +
  "  (an app client: npm run clients -- issue --app) to catch up through the event feed first, and for\n" +
  "  export (the app user's data as NDJSON, to standard output or --out) and forget (their erasure)";

/** The commands an app's backend runs for one app user, rather than serving. */
const APP_USER_COMMANDS = new Set(["export", "forget"]);

if (import.meta.main && asksForHelp(process.argv.slice(2))) {
  console.log(USAGE);
} else if (import.meta.main && APP_USER_COMMANDS.has(process.argv[2] ?? "")) {
  let command: AppUserCommand;
  try {
    command = appUserArguments(process.argv.slice(2), process.env);
  } catch (error) {
    console.error(`${(error as Error).message}\n${USAGE}`);
    process.exit(2);
  }
  try {
    process.stdout.write(await runAppUserCommand(command));
  } catch (error) {
    console.error((error as Error).message);
    process.exitCode = 1;
  }
} else if (import.meta.main) {
  let options: { port: number; secret: string; feed?: FeedSource };
  try {
    const args = receiverArguments(process.argv.slice(2));
    options = { port: args.port, secret: pushSecret(process.env, NOTIFIER_DEV_VARS), feed: feedSource(process.env, args) };
  } catch (error) {
    console.error(`${(error as Error).message}\n${USAGE}`);
    process.exit(2);
  }
  const receiver = await startReceiver(options);
  console.log(`App receiver at ${receiver.url}: POST events to ${receiver.url}/push, see receipts at ${receiver.url}/app-users/<app_user_id>/receipts`);
  if (!options.feed) console.log("No APP_CLIENT_ID and APP_CLIENT_SECRET: pushes only, no catch-up through the event feed.");
  for (const signal of ["SIGINT", "SIGTERM"] as const) process.once(signal, () => void receiver.close());
}

/** A running receiver: its base URL, its view, and how to stop it. */
export interface Receiver {
  url: string;
  view: AppView;
  server: Server;
  close(): Promise<void>;
}

/**
 * Starts the receiver on 127.0.0.1 (`port` 0 picks a free one). `secret` is `whsec_<base64>`, or
 * several separated by white space while the service rotates its secret. With `feed` it first
 * applies what the event feed holds after its cursor; a feed it cannot read is logged, and the
 * receiver takes pushes all the same. Every line it would print goes to `log` (the console by
 * default).
 */
export async function startReceiver(options: {
  port: number;
  secret: string;
  feed?: FeedSource;
  log?: (line: string) => void;
}): Promise<Receiver> {
  const log = options.log ?? ((line: string) => console.log(line));
  // Built once: a malformed secret stops the start, not the first delivery.
  const webhooks = verifiers(options.secret);
  const view = new AppView();
  if (options.feed) {
    try {
      const { events, cursor } = await catchUp(options.feed, (event) => log(`feed: ${describeOutcome(view.receive(event.event_id, event))}`));
      log(`caught up through the event feed: ${events} event${events === 1 ? "" : "s"}, last ${cursor ?? "none yet"}`);
    } catch (error) {
      log(`could not catch up through the event feed: ${(error as Error).message}`);
    }
  }
  const server = createServer((request, response) => {
    handle(request, response, { webhooks, view, log }).catch((error: unknown) => {
      log(`error: ${(error as Error).message}`);
      if (!response.headersSent) answer(response, 500, { error: "receiver failed" });
    });
  });
  server.listen(options.port, "127.0.0.1");
  await new Promise<void>((resolve, reject) => server.once("listening", resolve).once("error", reject));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    view,
    server,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

/**
 * The push secret: `APP_PUSH_SECRET` in `env`, else the one in the dotenv file `devVars`. The
 * error names where it looked, never a value.
 */
export function pushSecret(env: NodeJS.ProcessEnv, devVars: string): string {
  const fromEnv = env.APP_PUSH_SECRET?.trim();
  if (fromEnv) return fromEnv;
  let text: string;
  try {
    text = readFileSync(devVars, "utf8");
  } catch {
    throw new Error(`APP_PUSH_SECRET is not set and ${devVars} cannot be read: run npm start once, or set APP_PUSH_SECRET`);
  }
  const fromFile = parseEnv(text).APP_PUSH_SECRET?.trim();
  if (!fromFile) throw new Error(`APP_PUSH_SECRET is not set and ${devVars} holds none`);
  return fromFile;
}

async function handle(
  request: IncomingMessage,
  response: ServerResponse,
  { webhooks, view, log }: { webhooks: Webhook[]; view: AppView; log: (line: string) => void },
): Promise<void> {
  const url = new URL(request.url ?? "/", "http://receiver");
  if (request.method === "GET") {
    const match = /^\/app-users\/([^/]+)\/receipts$/.exec(url.pathname);
    if (!match) return answer(response, 404, { error: "GET /app-users/<app_user_id>/receipts" });
    const appUserId = decodeURIComponent(match[1]!);
    return answer(response, 200, { app_user_id: appUserId, receipts: view.receiptsOf(appUserId) });
  }
  if (request.method !== "POST") return answer(response, 405, { error: "POST an event, or GET a user's receipts" });

  const body = await readBody(request);
  if (body === undefined) return answer(response, 413, { error: "body too large" });
  const headers = {
    "webhook-id": headerValue(request, "webhook-id"),
    "webhook-timestamp": headerValue(request, "webhook-timestamp"),
    "webhook-signature": headerValue(request, "webhook-signature"),
  };
  let line: string;
  try {
    // The body exactly as received: the signature covers its bytes, not a re-serialised object.
    const payload = verify(webhooks, body, headers);
    line = describeOutcome(view.receive(headers["webhook-id"], payload));
  } catch (error) {
    if (error instanceof WebhookVerificationError) {
      log(`refused a delivery: ${error.message}`);
      return answer(response, 401, { error: "signature not valid" });
    }
    if (!(error instanceof MalformedEvent) && !(error instanceof SyntaxError)) throw error;
    // Signed by the service yet unreadable: a bug for a person to look at, not for retries.
    log(`refused ${headers["webhook-id"]}: ${error.message}`);
    return answer(response, 400, { error: `not an event: ${error.message}` });
  }
  log(line);
  response.writeHead(204).end();
}

function verifiers(secret: string): Webhook[] {
  const secrets = secret.trim().split(/\s+/).filter(Boolean);
  if (secrets.length === 0) throw new Error("APP_PUSH_SECRET is empty");
  return secrets.map((one) => {
    if (!one.startsWith("whsec_")) throw new Error("APP_PUSH_SECRET is not whsec_<base64>");
    try {
      return new Webhook(one);
    } catch {
      throw new Error("APP_PUSH_SECRET is not whsec_<base64>");
    }
  });
}

// Verifies with each secret in turn (a rotation); the first one's complaint is the one reported.
function verify(webhooks: Webhook[], body: string, headers: Record<string, string>): unknown {
  let firstError: unknown;
  for (const webhook of webhooks) {
    try {
      return webhook.verify(body, headers);
    } catch (error) {
      if (!(error instanceof WebhookVerificationError)) throw error;
      firstError ??= error;
    }
  }
  throw firstError;
}

function headerValue(request: IncomingMessage, name: string): string {
  const value = request.headers[name];
  return typeof value === "string" ? value : "";
}

async function readBody(request: IncomingMessage): Promise<string | undefined> {
  const chunks: Buffer[] = [];
  let size = 0;
  // Read to the end even past the limit, so that the 413 reaches the sender.
  for await (const chunk of request as AsyncIterable<Buffer>) {
    size += chunk.byteLength;
    if (size <= MAX_BODY_BYTES) chunks.push(chunk);
  }
  return size > MAX_BODY_BYTES ? undefined : Buffer.concat(chunks).toString("utf8");
}

function answer(response: ServerResponse, status: number, body: unknown): void {
  response.writeHead(status, { "content-type": "application/json" }).end(`${JSON.stringify(body)}\n`);
}

/**
 * Reads the receiver's options; the service is `--base-url`, else the local npm start of the
 * state `--persist-to` names (default .wrangler/state) on the port it recorded.
 */
export function receiverArguments(args: string[]): { port: number; baseUrl: string; cursorFile: string } {
  const { values } = parseArgs({
    args,
    options: { port: { type: "string" }, "base-url": { type: "string" }, "persist-to": { type: "string" }, "cursor-file": { type: "string" } },
    strict: true,
    allowPositionals: false,
  });
  const baseUrl = values["base-url"] ?? localServiceUrl(stateDirectory(values["persist-to"]));
  if (!URL.canParse(baseUrl)) throw new Error(`--base-url ${baseUrl} is not a URL`);
  return { port: portNumber(values.port), baseUrl: baseUrl.replace(/\/+$/, ""), cursorFile: values["cursor-file"] ?? DEFAULT_CURSOR_FILE };
}

function portNumber(text: string | undefined): number {
  if (text === undefined) return DEFAULT_PORT;
  const port = Number(text);
  if (!/^\d{1,5}$/.test(text) || port > 65_535) throw new Error(`--port ${text} is not a port number`);
  return port;
}

/** The app client that reads the feed, when both of its variables are set; one alone is a mistake. */
export function feedSource(env: NodeJS.ProcessEnv, args: { baseUrl: string; cursorFile: string }): FeedSource | undefined {
  const client = appClient(env, args.baseUrl);
  return client && { ...client, cursorFile: args.cursorFile };
}

function appClient(env: NodeJS.ProcessEnv, baseUrl: string): AppClient | undefined {
  const clientId = env.APP_CLIENT_ID?.trim();
  const clientSecret = env.APP_CLIENT_SECRET?.trim();
  if (!clientId && !clientSecret) return undefined;
  if (!clientId || !clientSecret) throw new Error("APP_CLIENT_ID and APP_CLIENT_SECRET go together: set both, or neither for pushes only");
  return { baseUrl, clientId, clientSecret };
}

/** An app user's command as its arguments give it, with the app client that runs it. */
export interface AppUserCommand {
  command: "export" | "forget";
  appUserId: string;
  out?: string;
  client: AppClient;
}

/**
 * Reads `export <app_user_id> [--out <file>] [--base-url <url>]` or `forget <app_user_id>
 * [--base-url <url>]`; the app client's credentials come from `env` alone, as for the feed.
 */
export function appUserArguments(args: string[], env: NodeJS.ProcessEnv): AppUserCommand {
  const { values, positionals } = parseArgs({
    args,
    options: { out: { type: "string" }, "base-url": { type: "string" }, "persist-to": { type: "string" } },
    strict: true,
    allowPositionals: true,
  });
  const [command, appUserId, extra] = positionals;
  if (command !== "export" && command !== "forget") throw new Error(`unknown command: ${command}`);
  if (!appUserId) throw new Error(`${command}: no app_user_id given`);
  if (extra !== undefined) throw new Error(`${command}: unexpected argument ${extra}`);
  if (values.out !== undefined && (command !== "export" || values.out === "")) throw new Error(command === "export" ? "--out needs a file name" : "--out goes with export only");
  const { baseUrl } = receiverArguments([
    ...(values["base-url"] === undefined ? [] : ["--base-url", values["base-url"]]),
    ...(values["persist-to"] === undefined ? [] : ["--persist-to", values["persist-to"]]),
  ]);
  const client = appClient(env, baseUrl);
  if (!client) throw new Error(`${command} needs the app client: set APP_CLIENT_ID and APP_CLIENT_SECRET (npm run clients -- issue --app)`);
  return { command, appUserId, ...(values.out !== undefined && { out: values.out }), client };
}

/**
 * Runs an app user's command; returns what goes to standard output: the export's file itself, or
 * a line that says what was done (the file then went to `out`).
 */
export async function runAppUserCommand({ command, appUserId, out, client }: AppUserCommand, polling?: JobPolling): Promise<string> {
  if (command === "forget") {
    const { job } = await forgetUser(client, appUserId, polling);
    return `forgot ${JSON.stringify(appUserId)}: ${String(job.counts?.receipts_erased)} receipts erased as of ${job.occurred_at}; job ${job.job_id}\n`;
  }
  const { job, file } = await exportUser(client, appUserId, polling);
  if (out === undefined) return file;
  writeFileSync(out, file);
  return `exported ${JSON.stringify(appUserId)}: ${String(job.counts?.receipts)} receipts (${String(job.counts?.archived_receipts)} archived) and ${String(job.counts?.audit_records)} audit records as of ${job.occurred_at} to ${out}; job ${job.job_id}\n`;
}
