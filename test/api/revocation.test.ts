/**
 * Issue 11, item 1: what `rotate` and `disable` do to tokens already issued. Each refusal is a
 * 403 that leaves every row of D1 as it was.
 */
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { hashClientSecret, makeClientSecret } from "../../src/shared/secrets.ts";
import { revokingIssuedTokens } from "../../src/shared/client-records.ts";
import { PATHS } from "../../src/shared/paths.ts";
import { clientKey, type ClientRecord } from "../../src/shared/types.ts";
import {
  call,
  expectRefused,
  issueClient,
  loginToken,
  newCaller,
  postAdd,
  signTestToken,
  uniqueId,
  type TestClient,
} from "../support/api.ts";
import { deleteHeadersFor, receiptExists, seedReceipt } from "../support/notices.ts";

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

describe("issue 11.1 revocation: docs/api.md#revocation", () => {
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

  it("a record stored before issue 11 (no tokens_valid_after) keeps its live tokens, and so do tokens signed before it", async () => {
    const { client, headers } = await newCaller();
    expect(await storedRecord(client.clientId)).not.toHaveProperty("tokens_valid_after");
    expect((await postAdd(headers)).status).toBe(200);
    const older = await signTestToken({ sub: client.clientId });
    expect((await postAdd(addHeaders(client, older))).status).toBe(200);
  });
});
