/**
 * Statements on the deployed shards, sent to D1's query API (`POST /accounts/{account}/d1/database/
 * {uuid}/query`, the endpoint `wrangler d1 execute --remote --command` posts to) from this process,
 * with the values as the request's parameters: no ID is ever in a process's arguments, which
 * anyone who lists the processes of the operator's machine can read. The credentials are
 * wrangler's own (`wrangler auth token --json`, or CLOUDFLARE_API_TOKEN), read once a process.
 */
import type { Statement } from "../../src/storage/statement.ts";
import { withTextParams } from "../../src/storage/statement.ts";
import { readConfigFile } from "./config.ts";
import type { BatchResult } from "./local-state.ts";
import type { ConfigShard } from "./shards.ts";
import { wranglerAsync } from "./wrangler.ts";

/** What the remote runner reads from outside: the environment, and wrangler for its credentials. */
export interface RemoteD1Options {
  /** CLOUDFLARE_API_BASE_URL, CLOUDFLARE_API_TOKEN and CLOUDFLARE_ACCOUNT_ID, as wrangler reads them. */
  env?: Record<string, string | undefined>;
  /** Runs wrangler and returns its standard output; asked for `auth token --json` alone. */
  wrangler?: (args: string[]) => Promise<string>;
}

/** Runs statements on the deployed shards. */
export interface RemoteD1 {
  /**
   * Runs statements on one shard as one batch (one request; see docs/operations.md on its
   * transaction) and returns each statement's rows and meta, as the local state's batch does.
   */
  batch<Row>(shard: ConfigShard, statements: readonly Statement[]): Promise<BatchResult<Row>[]>;
}

/** Wrangler's default; CLOUDFLARE_API_BASE_URL, which wrangler also reads, replaces it. */
export const CLOUDFLARE_API = "https://api.cloudflare.com/client/v4";

let shared: RemoteD1 | undefined;

/** The runner of this process, on its environment: its credentials and IDs are looked up once. */
export function remoteD1(): RemoteD1 {
  shared ??= remoteD1With();
  return shared;
}

/**
 * A runner on the given environment and wrangler, with a cache of its own: credentials, the
 * account's ID (a config's `account_id`, else CLOUDFLARE_ACCOUNT_ID, else the one account the
 * credentials reach: wrangler's order) and each database's uuid (a shard's `database_id`, else
 * looked up by its name).
 */
export function remoteD1With({ env = process.env, wrangler = wranglerAsync }: RemoteD1Options = {}): RemoteD1 {
  const base = (env.CLOUDFLARE_API_BASE_URL || CLOUDFLARE_API).replace(/\/+$/, "");
  const cache = new Map<string, Promise<unknown>>();
  // A lookup that failed is made again by the next call rather than failing every later one.
  const once = <T>(key: string, make: () => Promise<T>): Promise<T> => {
    let value = cache.get(key) as Promise<T> | undefined;
    if (!value) {
      value = make();
      cache.set(key, value);
      value.catch(() => cache.delete(key));
    }
    return value;
  };

  const credentials = () => once("credentials", () => authHeaders(env, wrangler));

  async function api<T>(what: string, path: string, body?: unknown): Promise<T> {
    const headers = { ...(await credentials()), ...(body === undefined ? {} : { "Content-Type": "application/json" }) };
    let response: Response;
    try {
      response = await fetch(`${base}${path}`, { method: body === undefined ? "GET" : "POST", headers, body: body === undefined ? undefined : JSON.stringify(body) });
    } catch (error) {
      throw new Error(`${what}: no answer from the Cloudflare API at ${base} (${oneLine(causeOf(error))})`);
    }
    const text = await response.text();
    let answer: ApiAnswer<T>;
    try {
      answer = JSON.parse(text) as ApiAnswer<T>;
    } catch {
      throw new Error(`${what}: the Cloudflare API answered HTTP ${response.status} without JSON`);
    }
    if (!response.ok || answer.success === false || answer.result === undefined) {
      throw new Error(`${what}: ${apiErrors(answer) || `the Cloudflare API answered HTTP ${response.status}`}`);
    }
    return answer.result;
  }

  const accountId = (shard: ConfigShard): Promise<string> => {
    const configured = shard.config === undefined ? undefined : readConfigFile(shard.config).account_id;
    if (typeof configured === "string" && configured !== "") return Promise.resolve(configured);
    if (env.CLOUDFLARE_ACCOUNT_ID) return Promise.resolve(env.CLOUDFLARE_ACCOUNT_ID);
    return once("account", async () => {
      const accounts = await api<{ id: string; name?: string }[]>("Finding the Cloudflare account", "/accounts");
      if (accounts.length === 1) return accounts[0]!.id;
      throw new Error(
        accounts.length === 0
          ? "The credentials reach no Cloudflare account: log in with `npx wrangler login` or set CLOUDFLARE_API_TOKEN."
          : `The credentials reach ${accounts.length} Cloudflare accounts: set CLOUDFLARE_ACCOUNT_ID to the deployment's.`,
      );
    });
  };

  const databaseId = (account: string, shard: ConfigShard): Promise<string> => {
    if (shard.database_id !== undefined) return Promise.resolve(shard.database_id);
    const name = shard.database_name;
    return once(`database ${account} ${name}`, async () => {
      const found = await api<{ name?: string; uuid?: string }[]>(
        `Looking up D1 database ${name}`,
        `/accounts/${encodeURIComponent(account)}/d1/database?name=${encodeURIComponent(name)}`,
      );
      const uuid = found.find((database) => database.name === name)?.uuid;
      if (!uuid) throw new Error(`No D1 database named ${name} in account ${account}.`);
      return uuid;
    });
  };

  return {
    async batch<Row>(shard: ConfigShard, statements: readonly Statement[]): Promise<BatchResult<Row>[]> {
      if (statements.length === 0) return [];
      const account = await accountId(shard);
      const uuid = await databaseId(account, shard);
      const batch = statements.map(withTextParams);
      const results = await api<{ results?: Row[]; meta?: Record<string, unknown> }[]>(
        `D1 query on ${shard.database_name}`,
        `/accounts/${encodeURIComponent(account)}/d1/database/${encodeURIComponent(uuid)}/query`,
        { batch },
      );
      if (!Array.isArray(results) || results.length !== statements.length || results.some((result) => !Array.isArray(result.results))) {
        throw new Error(`D1 query on ${shard.database_name}: the Cloudflare API answered ${Array.isArray(results) ? results.length : "no"} results for ${statements.length} statements`);
      }
      return results.map(({ results: rows, meta }) => ({ results: rows!, meta: meta ?? {} }));
    },
  };
}

/** The Cloudflare API's envelope. */
interface ApiAnswer<T> {
  success?: boolean;
  errors?: { code?: number; message?: string }[];
  result?: T;
}

/**
 * The headers that carry wrangler's credentials: CLOUDFLARE_API_TOKEN as wrangler reads it, else
 * what `wrangler auth token --json` prints (its login's OAuth token, or a global key and email),
 * read from its output: no credential goes into an argument either.
 */
async function authHeaders(env: Record<string, string | undefined>, wrangler: (args: string[]) => Promise<string>): Promise<Record<string, string>> {
  if (env.CLOUDFLARE_API_TOKEN) return { Authorization: `Bearer ${env.CLOUDFLARE_API_TOKEN}` };
  const output = await wrangler(["auth", "token", "--json"]).catch((error: unknown) => {
    throw new Error(`Reading wrangler's credentials failed (${oneLine((error as Error).message)}): log in with \`npx wrangler login\` or set CLOUDFLARE_API_TOKEN.`);
  });
  let auth: { type?: string; token?: string; key?: string; email?: string };
  try {
    auth = JSON.parse(output) as typeof auth;
  } catch {
    // Its output is not repeated: it may hold the credential.
    throw new Error("wrangler auth token --json printed no JSON: log in with `npx wrangler login` or set CLOUDFLARE_API_TOKEN.");
  }
  if (auth.type === "api_key" && auth.key && auth.email) return { "X-Auth-Key": auth.key, "X-Auth-Email": auth.email };
  if (auth.token) return { Authorization: `Bearer ${auth.token}` };
  throw new Error("wrangler auth token --json gave no credentials: log in with `npx wrangler login` or set CLOUDFLARE_API_TOKEN.");
}

/** The API's errors on one line: each message with its code, as wrangler prints them. */
function apiErrors(answer: ApiAnswer<unknown>): string {
  return (answer.errors ?? [])
    .map(({ code, message }) => oneLine(`${message ?? "error"}${code === undefined ? "" : ` [code: ${code}]`}`))
    .join("; ");
}

function causeOf(error: unknown): string {
  const cause = (error as { cause?: unknown }).cause;
  return String(cause instanceof Error ? cause.message : cause ?? (error as Error).message);
}

function oneLine(text: string): string {
  return text.replace(/\s*\n\s*/g, " ").trim();
}
