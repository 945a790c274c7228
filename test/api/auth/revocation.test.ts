/**
 * What `rotate` and `disable` do to tokens already issued, and how the
 * isolate's cache of client records gives way to a token newer than its copy. Each refusal is a
 * 403 that leaves every row of D1 as it was.
 */
import { createExecutionContext } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { beforeEach, describe, expect, it } from "vitest";
import { createApp } from "../../../src/api/app.ts";
import { newIsolateState } from "../../../src/api/context.ts";
import { hashClientSecret, makeClientSecret } from "../../../src/shared/secrets.ts";
import { revokingIssuedTokens } from "../../../src/shared/client-records.ts";
import { PATHS } from "../../../src/shared/paths.ts";
import { clientKey, type ClientRecord } from "../../../src/shared/types.ts";
import {
  BASE,
  call,
  WARM_ISOLATE,
  countedCall,
  expectRefused,
  issueClient,
  loginHeadersFor,
  loginToken,
  newCaller,
  postAdd,
  signTestToken,
  uniqueId,
  validReceiptBody,
  type TestClient,
} from "../../support/api.ts";
import { deleteHeadersFor, receiptExists, seedReceipt } from "../../support/notices.ts";

const now = () => Math.floor(Date.now() / 1000);

async function storedRecord(clientId: string): Promise<ClientRecord> {
  return (await env.CLIENTS.get<ClientRecord>(clientKey(clientId), "json"))!;
}

/** Stores the record as `npm run clients -- rotate` does: a new secret, every issued token revoked. */
async function rotate(client: TestClient): Promise<TestClient> {
  const secret = makeClientSecret();
  const record = { ...(await storedRecord(client.clientId)), secret_hash: await hashClientSecret(secret) };
  await env.CLIENTS.put(clientKey(client.clientId), JSON.stringify(revokingIssuedTokens(record)));
  return { ...client, secret };
}

/** Stores the record as `disable` (revoking every issued token) or `enable` (leaving them) does. */
async function setDisabled(clientId: string, disabled: boolean): Promise<void> {
  const record = { ...(await storedRecord(clientId)), disabled };
  await env.CLIENTS.put(clientKey(clientId), JSON.stringify(disabled ? revokingIssuedTokens(record) : record));
}

function addHeaders(client: TestClient, token: string): Record<string, string> {
  return {
    Authorization: `Bearer ${token}`,
    client_id: client.clientId,
    chain_id: client.chains[0]!,
    app_user_id: uniqueId("au"),
    "Content-Type": "application/json",
  };
}

const REVOKED = "Header Authorization holds a token issued before the client's secret was rotated or the client disabled";

describe("revocation: docs/api.md#revocation", () => {
  it("a token issued before rotate is refused on add and delete; nothing is stored or deleted", async () => {
    const client = await issueClient();
    const before = await loginToken(client);
    const receipt = await seedReceipt(client);
    const next = await rotate(client);

    const onAdd = await expectRefused(() => postAdd(addHeaders(client, before)), 403, "Forbidden");
    expect(onAdd).toContain(REVOKED);
    expect(onAdd).toContain("generate a fresh token with login");
    const onDelete = await expectRefused(() => call(PATHS.delete, { headers: deleteHeadersFor(before, receipt) }), 403, "Forbidden");
    expect(onDelete).toContain(REVOKED);
    expect(await receiptExists(receipt.receipt_id)).toBe(true);

    const after = await loginToken(next);
    expect((await postAdd(addHeaders(client, after))).status).toBe(200);
    expect((await call(PATHS.delete, { headers: deleteHeadersFor(after, receipt) })).status).toBe(200);
  });

  it("enable after disable does not bring back a token issued before disable; one issued after enable works", async () => {
    const client = await issueClient();
    const before = await loginToken(client);
    await setDisabled(client.clientId, true);
    await setDisabled(client.clientId, false);

    const message = await expectRefused(() => postAdd(addHeaders(client, before)), 403, "Forbidden");
    expect(message).toContain(REVOKED);
    const after = await loginToken(client);
    expect((await postAdd(addHeaders(client, after))).status).toBe(200);
  });

  it("a token issued under a newer record than this location sees yet is not refused (KV still spreading)", async () => {
    const client = await issueClient();
    const stale = await storedRecord(client.clientId);
    await setDisabled(client.clientId, true);
    await setDisabled(client.clientId, false);
    const token = await loginToken(client);
    // The location that serves the add has not seen the disable yet.
    await env.CLIENTS.put(clientKey(client.clientId), JSON.stringify(stale));
    expect((await postAdd(addHeaders(client, token))).status).toBe(200);
  });

  it("costs no storage call of its own: after rotate, add is one KV get and one D1 round trip, a revoked token one KV get", async () => {
    const client = await issueClient();
    const before = await loginToken(client);
    const next = await rotate(client);
    const after = await loginToken(next);
    const warm = newIsolateState();
    const measured = async (token: string) => {
      const request = { headers: addHeaders(client, token), body: JSON.stringify(validReceiptBody()) };
      const { answer, ledger } = await countedCall(PATHS.add, request, WARM_ISOLATE, warm);
      return { status: answer.status, calls: ledger.names("response") };
    };
    // A warm isolate: the shard states are read once a minute, not on this response path.
    await measured(after);
    expect(await measured(before)).toEqual({ status: 403, calls: ["kv.get"] });
    expect(await measured(after)).toEqual({ status: 200, calls: ["kv.get", "d1.batch"] });
  });

  it("a record stored before revocation existed (no tokens_valid_after) keeps its live tokens, and so do tokens signed before it", async () => {
    const { client, headers } = await newCaller();
    expect(await storedRecord(client.clientId)).not.toHaveProperty("tokens_valid_after");
    expect((await postAdd(headers)).status).toBe(200);
    const older = await signTestToken({ sub: client.clientId });
    expect((await postAdd(addHeaders(client, older))).status).toBe(200);
  });
});

// The suite runs with CLIENT_CACHE_SECONDS 0; these calls go to an app of the test's own, whose
// isolate keeps client records for the deployed 30 s, fresh for each test.
const cachingEnv = { ...env, CLIENT_CACHE_SECONDS: "30" };
let cachingApp = createApp();

async function callCaching(path: string, headers: Record<string, string>, body?: unknown) {
  const request = new Request(BASE + path, {
    method: "POST",
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const response = await cachingApp.fetch(request, cachingEnv, createExecutionContext());
  return { status: response.status, body: (await response.json()) as { message?: string } };
}

async function loginCaching(client: TestClient): Promise<string> {
  const answer = await callCaching(PATHS.login, loginHeadersFor(client));
  expect(answer.status).toBe(200);
  return (answer.body as { data: { access_token: string } }).data.access_token;
}

const addCaching = (client: TestClient, token: string) => callCaching(PATHS.add, addHeaders(client, token), validReceiptBody());

describe("client cache: docs/api.md#revocation", () => {
  beforeEach(() => {
    cachingApp = createApp();
  });

  it("after disable then enable, the first add with a token from the new login is accepted", async () => {
    const client = await issueClient();
    const before = await loginCaching(client);
    await setDisabled(client.clientId, true);
    // This isolate now holds the disabled record.
    expect((await addCaching(client, before)).body.message).toContain("names a disabled client");
    await setDisabled(client.clientId, false);

    const after = await loginCaching(client);
    const answer = await addCaching(client, after);
    expect(answer.status, answer.body.message).toBe(200);
  });

  it("a client issued after the isolate cached that it did not exist is served at its first add", async () => {
    const clientId = uniqueId("pos-later");
    const early = await signTestToken({ sub: clientId });
    const unknown = await addCaching({ clientId, secret: "", chains: ["c1"] }, early);
    expect(unknown.body.message).toContain("Header client_id is unknown");

    const client = await issueClient({ clientId });
    const answer = await addCaching(client, await loginCaching(client));
    expect(answer.status, answer.body.message).toBe(200);
  });

  it("a token issued before the cached copy was read is still answered from it, within CLIENT_CACHE_SECONDS", async () => {
    const clientId = uniqueId("pos-later");
    const issuedBefore = { sub: clientId, iat: now() - 60, exp: now() + 3540 };
    const unknown = await addCaching({ clientId, secret: "", chains: ["c1"] }, await signTestToken(issuedBefore));
    expect(unknown.body.message).toContain("Header client_id is unknown");

    const client = await issueClient({ clientId });
    const cached = await addCaching(client, await signTestToken(issuedBefore));
    expect(cached.status).toBe(403);
    expect(cached.body.message).toContain("Header client_id is unknown");
  });
});
