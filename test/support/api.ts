/** Shared by the Worker tests: calling the API, issuing clients straight into KV, logging in. */
import { createExecutionContext, waitOnExecutionContext } from "cloudflare:test";
import { env, exports } from "cloudflare:workers";
import { SignJWT, base64url } from "jose";
import { expect, vi } from "vitest";
import { createApp } from "../../src/api/app.ts";
import { newIsolateState, type IsolateState } from "../../src/api/context.ts";
import { newClientRecord } from "../../src/shared/client-records.ts";
import { POS_SCOPE, clientKey, type ClientRecord } from "../../src/shared/types.ts";
import { TEST_TOKEN_KEYS } from "./keys.ts";
import { SHARDS } from "./shards.ts";
import { StorageLedger } from "./storage-ledger.ts";
import { PATHS } from "../../src/shared/paths.ts";

export const BASE = "https://receipts.test";

/** A response read whole, so no body is left unconsumed. */
export interface Answer {
  status: number;
  headers: Headers;
  body: any;
}

/** Calls the API Worker through its real fetch handler. */
export async function call(
  path: string,
  init: { method?: string; headers?: HeadersInit; body?: BodyInit } = {},
): Promise<Answer> {
  const response = await exports.default.fetch(
    new Request(BASE + path, { method: init.method ?? "POST", headers: init.headers, body: init.body }),
  );
  return readAnswer(response);
}

async function readAnswer(response: Response): Promise<Answer> {
  const text = await response.text();
  let body: unknown = text;
  try {
    body = JSON.parse(text);
  } catch {
    // Left as text: the assertion on the body will show it.
  }
  return { status: response.status, headers: response.headers, body };
}

/**
 * Calls a fresh app inside the test's own request context instead of through the Worker's fetch
 * handler. The runtime keeps each request's I/O to its own context, so only this way can a fake
 * timer fire into the Worker's code, as a test of a deadline needs.
 */
export async function callInContext(
  path: string,
  init: { method?: string; headers?: Record<string, string>; body?: BodyInit } = {},
): Promise<Answer> {
  const request = new Request(BASE + path, { method: init.method ?? "POST", headers: init.headers, body: init.body });
  return readAnswer(await createApp().fetch(request, env, createExecutionContext()));
}

/**
 * Calls an app, like {@link callInContext}, with its storage bindings counted; the ledger
 * is complete when this returns, with every call after the answer marked as such. `settings`
 * override the test run's wrangler vars (or bindings); `isolate` is the memory the app keeps between calls,
 * a cold one unless a test hands over its own.
 */
export async function countedCall(
  path: string,
  init: { method?: string; headers?: Record<string, string>; body?: BodyInit } = {},
  settings: Record<string, unknown> = {},
  isolate: IsolateState = newIsolateState(),
): Promise<{ answer: Answer; ledger: StorageLedger }> {
  const ledger = new StorageLedger();
  const ctx = createExecutionContext();
  const request = new Request(BASE + path, { method: init.method ?? "POST", headers: init.headers, body: init.body });
  const answer = await readAnswer(await createApp(isolate).fetch(request, ledger.instrumentEnv({ ...env, ...settings }), ctx));
  ledger.answered = true;
  await waitOnExecutionContext(ctx);
  await ledger.drain();
  return { answer, ledger };
}

/**
 * Settings of a warm isolate for {@link countedCall}: shard states reused for a minute, as in
 * production, so that after one call through an isolate the response path holds only the
 * budgeted storage calls.
 */
export const WARM_ISOLATE = { SHARD_STATES_SECONDS: "60" };

let counter = 0;

/** An ID unique within the test run; storage is shared by the tests of one file. */
export function uniqueId(prefix: string): string {
  counter += 1;
  return `${prefix}-${counter}-${crypto.randomUUID().slice(0, 8)}`;
}

export interface TestClient {
  clientId: string;
  secret: string;
  chains: string[];
}

/** Writes a client record to the real local KV, as `npm run clients -- issue` does. */
export async function issueClient(
  options: { chains?: string[]; scopes?: string[]; disabled?: boolean; clientId?: string } = {},
): Promise<TestClient> {
  const clientId = options.clientId ?? uniqueId("pos");
  const chains = options.chains ?? [uniqueId("chain")];
  const { record, secret } = await newClientRecord({
    client_id: clientId,
    chains,
    scopes: options.scopes,
    disabled: options.disabled,
  });
  await env.CLIENTS.put(clientKey(clientId), JSON.stringify(record));
  return { clientId, secret, chains };
}

/** Changes a stored client record in place. */
export async function updateClient(clientId: string, change: Partial<ClientRecord>): Promise<void> {
  const record = await env.CLIENTS.get<ClientRecord>(clientKey(clientId), "json");
  await env.CLIENTS.put(clientKey(clientId), JSON.stringify({ ...record, ...change }));
}

/** The four login headers for a client. */
export function loginHeadersFor(client: TestClient): Record<string, string> {
  return { client_id: client.clientId, client_secret: client.secret, token_type: "Bearer", scope: POS_SCOPE };
}

/** Logs in and returns the access token. */
export async function loginToken(client: TestClient): Promise<string> {
  const answer = await call(PATHS.login, { headers: loginHeadersFor(client) });
  if (answer.status !== 200) throw new Error(`login failed: ${JSON.stringify(answer.body)}`);
  return answer.body.data.access_token;
}

/**
 * Signs a token with the test key set, with any claims or header a test needs: an expired
 * token, a wrong audience, an unknown kid. Defaults match what login issues. `key` picks a key of
 * the set by index, or is an attacker's own key (HMAC bytes or a private key), which then signs
 * under the kid of the set's first key unless `header` names another.
 */
export async function signTestToken(
  claims: Record<string, unknown>,
  header: Record<string, unknown> = {},
  key: number | Uint8Array | CryptoKey = 0,
): Promise<string> {
  const known = TEST_TOKEN_KEYS.keys[typeof key === "number" ? key : 0]!;
  const now = Math.floor(Date.now() / 1000);
  return new SignJWT({
    iss: env.TOKEN_ISSUER,
    aud: env.TOKEN_AUDIENCE,
    scope: POS_SCOPE,
    iat: now,
    exp: now + 3600,
    jti: crypto.randomUUID(),
    ...claims,
  })
    .setProtectedHeader({ alg: "HS256", kid: known.kid, typ: "JWT", ...header })
    .sign(typeof key === "number" ? base64url.decode(known.k) : key);
}

/** Asserts the shape every error body has (docs/api.md#errors) and returns the message. */
export function expectErrorShape(answer: Answer, status: number, statusWord: string): string {
  const { body } = answer;
  if (
    answer.status !== status ||
    body?.status !== statusWord ||
    body?.status_code !== status ||
    typeof body?.message !== "string" ||
    Object.keys(body).sort().join() !== "message,status,status_code" ||
    answer.headers.get("content-type") !== "application/json; charset=utf-8"
  ) {
    throw new Error(`expected ${status} ${statusWord}, got ${answer.status} ${JSON.stringify(body)}`);
  }
  return body.message;
}

/** Every non-empty subset of `names`, each a way to leave several of them out (or wrong) at once. */
export function nonEmptySubsets<Name extends string>(names: readonly Name[]): Name[][] {
  return Array.from({ length: 2 ** names.length - 1 }, (_, mask) => names.filter((_, bit) => ((mask + 1) >> bit) & 1));
}

/**
 * Asserts a 400 message of docs/api.md#common-rules: it names every missing header and no other of `all`,
 * says there is no default, and carries the invalid-syntax remark with the docs and support pointer.
 */
export function expectNamesMissing(message: string, missing: readonly string[], all: readonly string[]): void {
  for (const name of missing) expect(message).toContain(name);
  for (const name of all.filter((n) => !missing.includes(n))) expect(message).not.toMatch(new RegExp(`\\b${name}\\b`));
  expect(message).toContain("no default");
  expectRemark(message);
}

/** Asserts the generic remark every client-error message ends with (docs/api.md#errors). */
export function expectRemark(message: string): void {
  expect(message).toContain("invalid syntax");
  expect(message).toContain(env.DOCS_URL);
  expect(message).toContain(env.SUPPORT_CONTACT);
}

/** Header values that are present but not a usable string (docs/api.md#common-rules), each with its label. */
export const UNUSABLE_VALUES: readonly (readonly [label: string, value: string])[] = [
  ["empty", ""],
  ["only white space", "   "],
  ["longer than 256 characters", "x".repeat(257)],
  ["a control character", "abc\tdef"],
  ["non-ASCII", "caf\u00e9"],
];

/** Asserts the refusal's status and shape, and that no row of any table was added, changed or removed. */
export async function expectRefused(send: () => Promise<Answer>, status: number, statusWord: string): Promise<string> {
  const before = await databaseRows();
  const message = expectErrorShape(await send(), status, statusWord);
  expect(await databaseRows()).toEqual(before);
  return message;
}

/**
 * Every row of every table of the service on every shard (`<shard>.<table>`), so that a test can
 * tell that a refused call changed nothing at all, including tables a later migration adds.
 */
export async function databaseRows(): Promise<Record<string, unknown[]>> {
  const tables = await serviceTables();
  const perShard = await Promise.all(
    SHARDS.map(async (shard) => {
      // One batch a shard: a refused call's test reads every table twice.
      // In the order of a plain scan, which is the same for the same rows (some tables have no
      // rowid to order by, migration 0012).
      const results = await shard.db.batch(tables.map((table) => shard.db.prepare(`SELECT * FROM "${table}"`)));
      return tables.map((table, i) => {
        const moving = DELIVERY_PROGRESS[table] ?? [];
        const rows = (results[i]!.results as Record<string, unknown>[]).map((row) =>
          Object.fromEntries(Object.entries(row).filter(([column]) => !moving.includes(column))),
        );
        return [`${shard.name}.${table}`, rows] as const;
      });
    }),
  );
  return Object.fromEntries(perShard.flat());
}

// The notifier beside the API marks a notice's progress on its outbox row in the background, after
// an earlier test's delete answered: those columns change under any later test's feet.
const DELIVERY_PROGRESS: Record<string, string[]> = {
  notice_outbox: ["enqueued_at", "delivered_at", "claimed_until", "attempts", "last_error"],
};

/**
 * How many rows each table of the service holds over all shards, one query a shard: the cheap
 * form of `databaseRows`.
 */
export async function rowCounts(): Promise<Record<string, number>> {
  const tables = await serviceTables();
  const counts = tables.map((table) => `(SELECT COUNT(*) FROM "${table}") AS "${table}"`).join(", ");
  const perShard = await Promise.all(SHARDS.map((shard) => shard.db.prepare(`SELECT ${counts}`).first<Record<string, number>>()));
  return Object.fromEntries(tables.map((table) => [table, perShard.reduce((sum, row) => sum + row![table]!, 0)]));
}

let tables: Promise<string[]> | undefined;

// D1's own bookkeeping and the migrations table are not the service's data. The setup file has
// migrated before any test runs, so the list holds for the whole file.
function serviceTables(): Promise<string[]> {
  tables ??= SHARDS[0]!.db.prepare(
    "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' AND name NOT LIKE '_cf_%' AND name != 'd1_migrations' ORDER BY name",
  )
    .all<{ name: string }>()
    .then(({ results }) => results.map(({ name }) => name));
  return tables;
}

/** A receipt body that keeps every rule: a returned item and a discount line bring the total to 248. */
export function validReceiptBody(): Record<string, any> {
  return {
    purchased_at: "2026-11-22T14:03:00+01:00",
    currency: "EUR",
    total: 248,
    line_items: [
      { description: "Oat milk 1 l", quantity: 2, unit_price: 149, total: 298, sku: "4006381333931", vat_rate: 7 },
      { description: "Rye bread", quantity: 1, unit_price: 249, total: 249, vat_rate: 7 },
      { description: "Returned: apple juice", quantity: -1, unit_price: 199, total: -199, vat_rate: 7 },
      { description: "Loyalty discount", quantity: 1, unit_price: -100, total: -100 },
    ],
    store_id: "store-0042",
    pos_receipt_number: "0042-7-000123",
    payments: [{ method: "card", amount: 248 }],
    metadata: { loyalty_card: "4711" },
  };
}

/** A logged-in client and the headers of a valid add for one of its app users. */
export interface Caller {
  client: TestClient;
  /** The access token its headers carry. */
  token: string;
  headers: Record<string, string>;
}

/** A fresh client, logged in, with the headers of a valid add for one of its app users. */
export async function newCaller(options: Parameters<typeof issueClient>[0] = {}): Promise<Caller> {
  const client = await issueClient(options);
  const token = await loginToken(client);
  return {
    client,
    token,
    headers: {
      Authorization: `Bearer ${token}`,
      client_id: client.clientId,
      chain_id: client.chains[0]!,
      app_user_id: uniqueId("au"),
      "Content-Type": "application/json",
    },
  };
}

/** Sends an add; a body that is not a string is sent as JSON. Bytes, so no Content-Type is implied. */
export function postAdd(headers: Record<string, string>, body: unknown = validReceiptBody()): Promise<Answer> {
  const text = typeof body === "string" ? body : JSON.stringify(body);
  return call(PATHS.add, { headers, body: new TextEncoder().encode(text) });
}

/**
 * Everything the Worker wrote to the console while `run` ran, one string per call, on every
 * level; the console stays quiet meanwhile. The Worker runs in the test's isolate, so its
 * console is this one.
 */
export async function consoleLines(run: () => Promise<unknown>): Promise<string[]> {
  const lines: string[] = [];
  const record = (...args: unknown[]) => void lines.push(args.map(String).join(" "));
  const levels = ["log", "info", "warn", "error", "debug"] as const;
  const spies = levels.map((level) => vi.spyOn(console, level).mockImplementation(record));
  try {
    await run();
    return lines;
  } finally {
    for (const spy of spies) spy.mockRestore();
  }
}

/** The structured log lines written while `run` ran, parsed. */
export async function loggedRequests(run: () => Promise<unknown>): Promise<Record<string, unknown>[]> {
  const lines = await consoleLines(run);
  return lines.filter((line) => line.startsWith("{")).map((line) => JSON.parse(line));
}
