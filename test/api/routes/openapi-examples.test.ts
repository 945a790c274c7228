/**
 * Every error example of the served OpenAPI document, replayed against the Worker: each has a
 * scenario here that provokes it, and the Worker's answer must be the example, word for word,
 * with the headers the document names. A message changed in a route fails here until the
 * document (src/api/openapi/documented-operations.ts, then `npm run openapi`) says the same.
 */
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import committed from "../../../docs/openapi.json";
import { createApp } from "../../../src/api/app.ts";
import { UNCONFIGURED_SUPPORT } from "../../../src/api/errors.ts";
import { DOCUMENTED_OPERATIONS } from "../../../src/api/openapi/documented-operations.ts";
import { EXAMPLE_REFERENCE, EXAMPLE_SUPPORT, examplePath, openApiPath } from "../../../src/api/openapi/document.ts";
import { PATHS } from "../../../src/shared/paths.ts";
import { ratePolicy, type LimitedRoute } from "../../../src/shared/rate-limits.ts";
import { shardStateKey, type ShardState } from "../../../src/shared/shard-ids.ts";
import { APP_SCOPE, OPS_SCOPE, POS_SCOPE } from "../../../src/shared/types.ts";
import {
  BASE,
  call,
  issueClient,
  loginHeadersFor,
  loginToken,
  signTestToken,
  uniqueId,
  updateClient,
  type Answer,
} from "../../support/api.ts";
import { deleteHeadersFor, seedReceipt } from "../../support/notices.ts";
import { spend, withinOneWindow } from "../../support/rate-limits.ts";
import { SHARDS, failingWith } from "../../support/shards.ts";

type Scenario = () => Promise<Answer>;

interface ExampleResponse {
  headers?: Record<string, { example?: string | number; schema?: { enum?: (string | number)[] } }>;
  // The reference page's 200 is HTML; every error is JSON.
  content: { "application/json"?: { examples?: Record<string, { value: unknown }> } };
}
interface DocumentShape {
  paths: Record<string, Record<string, { responses: Record<string, ExampleResponse> }>>;
  components: { responses: Record<string, ExampleResponse> };
}
const document = committed as unknown as DocumentShape;

const NOT_FOUND_PATH = "/receipts/v2/remove";

const SCENARIOS: Record<string, Record<string, Scenario>> = {
  [PATHS.login]: {
    "missing-header": async () => {
      const { client_secret: _secret, scope: _scope, ...headers } = loginHeadersFor(await issueClient());
      return call(PATHS.login, { headers });
    },
    "unusable-header": async () => login({ client_id: "caf\u00e9" }),
    "token-type": async () => login({ token_type: "MAC" }),
    scope: async () => login({ scope: "service.admin" }),
    credentials: async () => login({ client_secret: "not-the-secret" }),
    disabled: async () => call(PATHS.login, { headers: loginHeadersFor(await issueClient({ disabled: true })) }),
    "scope-not-granted": async () => call(PATHS.login, { headers: loginHeadersFor(await issueClient({ scopes: [] })) }),
    "too-many-failures": async () => {
      const headers = { ...loginHeadersFor(await issueClient()), client_secret: "guess" };
      let answer = await call(PATHS.login, { headers });
      // The local limiter's windows turn with the wall-clock minute: 11 tries reach a 429 even then.
      for (let i = 0; i < 10 && answer.status !== 429; i += 1) answer = await call(PATHS.login, { headers });
      return answer;
    },
    ...commonScenarios(PATHS.login, "POST"),
  },

  [PATHS.add]: {
    "missing-header": async () => {
      const { chain_id: _chain, "Content-Type": _type, ...headers } = await addHeadersFor();
      return add(headers);
    },
    "unusable-header": async () => add({ ...(await addHeadersFor()), app_user_id: "a\tb" }),
    "not-bearer": async () => add({ ...(await addHeadersFor()), Authorization: "Basic cG9zOnNlY3JldA==" }),
    "invalid-token": async () => add({ ...(await addHeadersFor()), Authorization: "Bearer not.a.token" }),
    "expired-token": async () => {
      const headers = await addHeadersFor();
      return add({ ...headers, Authorization: `Bearer ${await expiredToken(headers.client_id!)}` });
    },
    "wrong-scope": async () => add({ ...(await addHeadersFor()), ...(await appHeaders()) }),
    "unknown-client": async () => add({ ...(await addHeadersFor()), client_id: uniqueId("nobody") }),
    "disabled-client": async () => {
      const headers = await addHeadersFor();
      await updateClient(headers.client_id!, { disabled: true });
      return add(headers);
    },
    "other-client": async () => add({ ...(await addHeadersFor()), client_id: (await issueClient()).clientId }),
    "revoked-token": async () => {
      const headers = await addHeadersFor();
      await updateClient(headers.client_id!, { tokens_valid_after: new Date().toISOString() });
      return add(headers);
    },
    chain: async () => add({ ...(await addHeadersFor()), chain_id: uniqueId("chain") }),
    "media-type": async () => add({ ...(await addHeadersFor()), "Content-Type": "text/plain" }),
    "content-encoding": async () => add({ ...(await addHeadersFor()), "Content-Encoding": "gzip" }),
    "too-large": async () => add(await addHeadersFor(), "x".repeat(64 * 1024 + 1)),
    "not-json": async () => add(await addHeadersFor(), "{"),
    "body-rule": async () => {
      const [first, ...rest] = exampleBody().line_items;
      return add(await addHeadersFor(), { ...exampleBody(), currency: "eur", line_items: [{ ...first!, quantity: 0 }, ...rest] });
    },
    "not-i-json": async () => add(await addHeadersFor(), JSON.stringify(exampleBody()).replace('"total":', '"total":1,"total":')),
    "unknown-field": async () => add(await addHeadersFor(), { ...exampleBody(), totl: 447 }),
    "card-number": async () => {
      const { mediaType, example } = DOCUMENTED_OPERATIONS[PATHS.add]!.body!.alternatives!.at(-1)!;
      const body = structuredClone(example) as { payments: { tender: { bank_identification_number: string } }[] };
      body.payments[0]!.tender.bank_identification_number = "4111 1111 1111 1111";
      return add({ ...(await addHeadersFor()), "Content-Type": mediaType }, body);
    },
    "unknown-profile": async () => add({ ...(await addHeadersFor()), "Content-Type": "application/json;profile=https://example.com/receipt" }),
    "media-type-parameter": async () => add({ ...(await addHeadersFor()), "Content-Type": "application/json;profile=https://example.com/a;profile=https://example.com/b" }),
    "dr-body-rule": async () => {
      const { mediaType, example } = DOCUMENTED_OPERATIONS[PATHS.add]!.body!.alternatives!.at(-1)!;
      const body = structuredClone(example) as { items: { quantity: { value: unknown } }[] };
      body.items[0]!.quantity.value = "2";
      return add({ ...(await addHeadersFor()), "Content-Type": mediaType }, body);
    },
    "idempotency-conflict": async () => {
      const headers = { ...(await addHeadersFor()), "Idempotency-Key": uniqueId("key") };
      expect((await add(headers)).status).toBe(200);
      return add({ ...headers, app_user_id: uniqueId("au") });
    },
    "no-open-shard": async () => {
      const headers = await addHeadersFor();
      const closed: ShardState = { state: "closed", changed_at: new Date().toISOString(), by: "operator" };
      const keys = SHARDS.map((shard) => shardStateKey(shard.name));
      await Promise.all(keys.map((key) => env.SHARD_STATES.put(key, JSON.stringify(closed))));
      try {
        return await add(headers);
      } finally {
        await Promise.all(keys.map((key) => env.SHARD_STATES.delete(key)));
      }
    },
    "rate-limited": async () => overLimit("add", addHeadersFor, (headers) => add(headers)),
    "shard-overloaded": async () => onOverloadedShards(PATHS.add, await addHeadersFor(), JSON.stringify(exampleBody())),
    ...commonScenarios(PATHS.add, "POST"),
  },

  [PATHS.delete]: {
    "missing-header": async () => {
      const { receipt_id: _receipt, app_user_id: _user, ...headers } = await deleteHeaders();
      return call(PATHS.delete, { headers });
    },
    "unusable-header": async () => remove({ receipt_id: "r".repeat(257) }),
    "not-bearer": async () => remove({ Authorization: "Basic cG9zOnNlY3JldA==" }),
    "invalid-token": async () => remove({ Authorization: "Bearer not.a.token" }),
    "expired-token": async () => {
      const headers = await deleteHeaders();
      return call(PATHS.delete, { headers: { ...headers, Authorization: `Bearer ${await expiredToken(headers.client_id!)}` } });
    },
    "wrong-scope": async () => remove(await appHeaders()),
    "unknown-client": async () => remove({ client_id: uniqueId("nobody") }),
    "disabled-client": async () => {
      const headers = await deleteHeaders();
      await updateClient(headers.client_id!, { disabled: true });
      return call(PATHS.delete, { headers });
    },
    "other-client": async () => remove({ client_id: (await issueClient()).clientId }),
    "revoked-token": async () => {
      const headers = await deleteHeaders();
      await updateClient(headers.client_id!, { tokens_valid_after: new Date().toISOString() });
      return call(PATHS.delete, { headers });
    },
    "no-receipt": async () => remove({ receipt_id: crypto.randomUUID() }),
    mismatch: async () => remove({ chain_id: uniqueId("chain"), app_user_id: uniqueId("au") }),
    "rate-limited": async () => overLimit("delete", deleteHeaders, (headers) => call(PATHS.delete, { headers })),
    "shard-overloaded": async () => onOverloadedShards(PATHS.delete, await deleteHeaders()),
    ...commonScenarios(PATHS.delete, "POST"),
  },

  [PATHS.events]: {
    ...bearerScenarios(readFeed, appHeaders, APP_SCOPE),
    after: async () => readFeed(await appHeaders(), "?after=not-an-event"),
    limit: async () => readFeed(await appHeaders(), "?limit=500"),
    "rate-limited": async () => overLimit("events", appHeaders, (headers) => readFeed(headers)),
    ...commonScenarios(PATHS.events, "GET"),
  },
  [PATHS.status]: {
    ...bearerScenarios((headers) => call(PATHS.status, { method: "GET", headers }), opsHeaders, OPS_SCOPE),
    ...commonScenarios(PATHS.status, "GET"),
  },
  [openApiPath(PATHS.exportAppUser)]: startJobScenarios(PATHS.exportAppUser),
  [openApiPath(PATHS.eraseAppUser)]: startJobScenarios(PATHS.eraseAppUser),
  [openApiPath(PATHS.job)]: readJobScenarios(PATHS.job),
  [openApiPath(PATHS.jobExport)]: {
    ...readJobScenarios(PATHS.jobExport),
    "not-complete": async () => {
      const headers = await appHeaders();
      const started = await call(PATHS.eraseAppUser, { headers: { ...headers, app_user_id: uniqueId("au"), "Idempotency-Key": uniqueId("key") } });
      return readJob(PATHS.jobExport, headers, started.body.data.job_id);
    },
  },
  [PATHS.openapi]: commonScenarios(PATHS.openapi, "GET"),
  [PATHS.docs]: commonScenarios(PATHS.docs, "GET"),
};

// A 429's scenario may wait out most of the limiter's 10 s window before it spends the limit,
// and try again in the next.
describe("every error example of the OpenAPI document is the Worker's real answer", { timeout: 150_000 }, () => {
  for (const [path, item] of Object.entries(document.paths)) {
    for (const [method, operation] of Object.entries(item)) {
      const examples = errorExamples(operation.responses);
      it(`${method.toUpperCase()} ${path}: a scenario for every example, and an example for every scenario`, () => {
        expect(Object.keys(SCENARIOS[path] ?? {}).sort()).toEqual(examples.map(([name]) => name).sort());
      });
      for (const [name, status, example, response] of examples) {
        it(`${method.toUpperCase()} ${path} ${status} ${name}`, async () => {
          expectExample(await SCENARIOS[path]![name]!(), status, example, response);
        });
      }
    }
  }

  it("components.responses.NotFound: an unknown path", async () => {
    const examples = errorExamples({ 404: document.components.responses.NotFound! });
    expect(examples.map(([name]) => name)).toEqual(["unknown-path"]);
    for (const [, status, example, response] of examples) {
      expectExample(await call(NOT_FOUND_PATH), status, example, response);
    }
  });
});

function errorExamples(responses: Record<string, ExampleResponse>): [string, number, unknown, ExampleResponse][] {
  return Object.entries(responses).flatMap(([status, response]) =>
    Object.entries(response.content["application/json"]?.examples ?? {}).map(
      ([name, example]) => [name, Number(status), example.value, response] as [string, number, unknown, ExampleResponse],
    ),
  );
}

function expectExample(answer: Answer, status: number, example: unknown, response: ExampleResponse): void {
  expect(answer.status).toBe(status);
  // A 500 from a broken setting cannot name the configured pointer, only the unconfigured one.
  const message = String(answer.body?.message)
    .replaceAll(env.DOCS_URL, EXAMPLE_SUPPORT.docsUrl)
    .replaceAll(env.SUPPORT_CONTACT, EXAMPLE_SUPPORT.supportContact)
    .replaceAll(UNCONFIGURED_SUPPORT.supportContact, EXAMPLE_SUPPORT.supportContact);
  expect({ ...answer.body, message }).toEqual(example);
  for (const [name, header] of Object.entries(response.headers ?? {})) {
    // A header whose value differs between the examples of one status lists its values instead.
    if (header.schema?.enum) expect(header.schema.enum.map(String), name).toContain(answer.headers.get(name));
    else expect(answer.headers.get(name), name).toBe(String(header.example));
  }
}

/** The request `send` makes with a fresh client's `headers`, sent once that client has spent its limit on the route. */
async function overLimit(
  route: LimitedRoute,
  headersOf: () => Promise<Record<string, string>>,
  send: (headers: Record<string, string>) => Promise<Answer>,
): Promise<Answer> {
  const policy = ratePolicy(route, "standard");
  return withinOneWindow(policy, async () => {
    const headers = await headersOf();
    await spend(policy, headers.client_id!, policy.quota);
    return send(headers);
  });
}

/** A POST to `path` through an app whose every shard answers as overloaded. */
async function onOverloadedShards(path: string, headers: Record<string, string>, body?: string): Promise<Answer> {
  const busy = Object.fromEntries(SHARDS.map((shard) => [shard.binding, failingWith(shard.db, "D1_ERROR: D1 DB is overloaded. Too many requests queued.")]));
  const response = await createApp().fetch(new Request(BASE + path, { method: "POST", headers, body }), { ...env, ...busy });
  return { status: response.status, headers: response.headers, body: await response.json() };
}

/** The wrong method, and a 500 from a broken setting whose reference is the example's cf-ray. */
function commonScenarios(path: string, method: string): Record<string, Scenario> {
  return {
    "wrong-method": () => call(path, { method: "DELETE" }),
    internal: async () => {
      const response = await createApp().fetch(
        new Request(BASE + path, { method, headers: { "cf-ray": EXAMPLE_REFERENCE } }),
        { ...env, TOKEN_KEYS: "{not json" },
      );
      return { status: response.status, headers: response.headers, body: await response.json() };
    },
  };
}

async function login(change: Record<string, string>): Promise<Answer> {
  return call(PATHS.login, { headers: { ...loginHeadersFor(await issueClient()), ...change } });
}

function exampleBody() {
  return structuredClone(DOCUMENTED_OPERATIONS[PATHS.add]!.body!.example as { line_items: Record<string, unknown>[] });
}

async function addHeadersFor(): Promise<Record<string, string>> {
  const client = await issueClient();
  return {
    Authorization: `Bearer ${await loginToken(client)}`,
    client_id: client.clientId,
    chain_id: client.chains[0]!,
    app_user_id: uniqueId("au"),
    "Content-Type": "application/json",
  };
}

// Bytes, so that no Content-Type is implied by the body.
function add(headers: Record<string, string>, body: unknown = exampleBody()): Promise<Answer> {
  const text = typeof body === "string" ? body : JSON.stringify(body);
  return call(PATHS.add, { headers, body: new TextEncoder().encode(text) });
}

async function deleteHeaders(): Promise<Record<string, string>> {
  const client = await issueClient();
  return deleteHeadersFor(await loginToken(client), await seedReceipt(client));
}

async function remove(change: Record<string, string>): Promise<Answer> {
  return call(PATHS.delete, { headers: { ...(await deleteHeaders()), ...change } });
}

async function expiredToken(clientId: string, scope = POS_SCOPE): Promise<string> {
  const now = Math.floor(Date.now() / 1000);
  return signTestToken({ sub: clientId, scope, iat: now - 7200, exp: now - 3600 });
}

/** The feed's headers for a fresh app push service's client, logged in with scope service.app. */
async function appHeaders(): Promise<Record<string, string>> {
  const client = await issueClient({ chains: [], scopes: [APP_SCOPE] });
  const answer = await call(PATHS.login, { headers: { ...loginHeadersFor(client), scope: APP_SCOPE } });
  return { Authorization: `Bearer ${answer.body.data.access_token}`, client_id: client.clientId };
}

/** The status's headers for a fresh operator's monitor, logged in with scope service.ops. */
async function opsHeaders(): Promise<Record<string, string>> {
  const client = await issueClient({ chains: [], scopes: [OPS_SCOPE] });
  const answer = await call(PATHS.login, { headers: { ...loginHeadersFor(client), scope: OPS_SCOPE } });
  return { Authorization: `Bearer ${answer.body.data.access_token}`, client_id: client.clientId };
}

/** The header and token refusals of a GET that takes a token of `scope` (the feed, the status). */
function bearerScenarios(
  read: (headers: Record<string, string>) => Promise<Answer>,
  fresh: () => Promise<Record<string, string>>,
  scope: string,
): Record<string, Scenario> {
  return {
    "missing-header": async () => read({}),
    "unusable-header": async () => read({ ...(await fresh()), client_id: "caf\u00e9" }),
    "not-bearer": async () => read({ ...(await fresh()), Authorization: "Basic cG9zOnNlY3JldA==" }),
    "invalid-token": async () => read({ ...(await fresh()), Authorization: "Bearer not.a.token" }),
    "expired-token": async () => {
      const headers = await fresh();
      return read({ ...headers, Authorization: `Bearer ${await expiredToken(headers.client_id!, scope)}` });
    },
    "wrong-scope": async () => {
      const client = await issueClient();
      return read({ Authorization: `Bearer ${await loginToken(client)}`, client_id: client.clientId });
    },
    "unknown-client": async () => read({ ...(await fresh()), client_id: uniqueId("nobody") }),
    "disabled-client": async () => {
      const headers = await fresh();
      await updateClient(headers.client_id!, { disabled: true });
      return read(headers);
    },
    "other-client": async () => read({ ...(await fresh()), client_id: (await fresh()).client_id! }),
    "revoked-token": async () => {
      const headers = await fresh();
      await updateClient(headers.client_id!, { tokens_valid_after: new Date().toISOString() });
      return read(headers);
    },
  };
}

/** The refusals of a job's start: its headers, its token, its key and its limit. */
function startJobScenarios(path: string): Record<string, Scenario> {
  const send = (headers: Record<string, string>, job: Record<string, string> = { app_user_id: uniqueId("au"), "Idempotency-Key": uniqueId("key") }) =>
    call(path, { headers: { ...headers, ...job } });
  return {
    ...bearerScenarios(send, appHeaders, APP_SCOPE),
    "missing-header": async () => call(path, { headers: await appHeaders() }),
    "malformed-app-user-id": async () => send(await appHeaders(), { app_user_id: "a\tb", "Idempotency-Key": uniqueId("key") }),
    "job-conflict": async () => {
      const headers = await appHeaders();
      const key = uniqueId("key");
      expect((await send(headers, { app_user_id: uniqueId("au"), "Idempotency-Key": key })).status).toBe(202);
      return send(headers, { app_user_id: uniqueId("au"), "Idempotency-Key": key });
    },
    "rate-limited": async () => overLimit("jobs", appHeaders, (headers) => send(headers)),
    ...commonScenarios(examplePath(path, DOCUMENTED_OPERATIONS[path]!), "POST"),
  };
}

/** The refusals of a job's read, on the example's job ID but for the unknown job. */
function readJobScenarios(path: string): Record<string, Scenario> {
  const read = (headers: Record<string, string>) => readJob(path, headers, crypto.randomUUID());
  return {
    ...bearerScenarios(read, appHeaders, APP_SCOPE),
    "no-job": async () => read(await appHeaders()),
    "rate-limited": async () => overLimit("jobs", appHeaders, read),
    ...commonScenarios(examplePath(path, DOCUMENTED_OPERATIONS[path]!), "GET"),
  };
}

function readJob(path: string, headers: Record<string, string>, jobId: string): Promise<Answer> {
  return call(path.replace(":job_id", jobId), { method: "GET", headers });
}

function readFeed(headers: Record<string, string>, query = ""): Promise<Answer> {
  return call(`${PATHS.events}${query}`, { method: "GET", headers });
}
