/** Shared by the Worker tests: calling the API, issuing clients straight into KV, logging in. */
import { env, exports } from "cloudflare:workers";
import { SignJWT, base64url } from "jose";
import { expect } from "vitest";
import { hashClientSecret, makeClientSecret } from "../src/shared/secrets.ts";
import { POS_SCOPE, clientKey, type ClientRecord } from "../src/shared/types.ts";
import { TEST_TOKEN_KEYS } from "./keys.ts";

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
  init: { method?: string; headers?: Record<string, string>; body?: BodyInit } = {},
): Promise<Answer> {
  const response = await exports.default.fetch(
    new Request(BASE + path, { method: init.method ?? "POST", headers: init.headers, body: init.body }),
  );
  const text = await response.text();
  let body: unknown = text;
  try {
    body = JSON.parse(text);
  } catch {
    // Left as text: the assertion on the body will show it.
  }
  return { status: response.status, headers: response.headers, body };
}

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
  const secret = makeClientSecret();
  const chains = options.chains ?? [uniqueId("chain")];
  const now = new Date().toISOString();
  const record: ClientRecord = {
    client_id: clientId,
    secret_hash: await hashClientSecret(secret),
    chains,
    scopes: options.scopes ?? [POS_SCOPE],
    disabled: options.disabled ?? false,
    created_at: now,
    updated_at: now,
  };
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
  const answer = await call("/receipts/v2/login", { headers: loginHeadersFor(client) });
  if (answer.status !== 200) throw new Error(`login failed: ${JSON.stringify(answer.body)}`);
  return answer.body.data.access_token;
}

/**
 * Signs a token with the test key set, with any claims or header a test needs: an expired
 * token, a wrong audience, an unknown kid. Defaults match what login issues.
 */
export async function signTestToken(
  claims: Record<string, unknown>,
  header: Record<string, unknown> = {},
  keyIndex = 0,
): Promise<string> {
  const key = TEST_TOKEN_KEYS.keys[keyIndex]!;
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
    .setProtectedHeader({ alg: "HS256", kid: key.kid, typ: "JWT", ...header })
    .sign(base64url.decode(key.k));
}

/** Asserts the shape every error body has (seed §7) and returns the message. */
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
 * Asserts a 400 message of contract §1: it names every missing header and no other of `all`,
 * says there is no default, and carries the invalid-syntax remark with the docs and support pointer.
 */
export function expectNamesMissing(message: string, missing: readonly string[], all: readonly string[]): void {
  for (const name of missing) expect(message).toContain(name);
  for (const name of all.filter((n) => !missing.includes(n))) expect(message).not.toMatch(new RegExp(`\\b${name}\\b`));
  expect(message).toContain("no default");
  expectRemark(message);
}

/** Asserts the generic remark every client-error message ends with (seed §7). */
export function expectRemark(message: string): void {
  expect(message).toContain("invalid syntax");
  expect(message).toContain(env.DOCS_URL);
  expect(message).toContain(env.SUPPORT_CONTACT);
}

/** Header values that are present but not a usable string (contract §1), each with its label. */
export const UNUSABLE_VALUES: readonly (readonly [label: string, value: string])[] = [
  ["empty", ""],
  ["only white space", "   "],
  ["longer than 256 characters", "x".repeat(257)],
  ["a control character", "abc\tdef"],
  ["non-ASCII", "caf\u00e9"],
];
