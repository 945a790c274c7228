import { createExecutionContext, waitOnExecutionContext } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { createApp } from "../../../src/api/app.ts";
import { EVENT_ID_PATTERN } from "../../../src/storage/outbox/statements.ts";
import {
  type Answer,
  BASE,
  type TestClient,
  call,
  countedCall,
  expectErrorShape,
  expectNamesMissing,
  expectRemark,
  UNUSABLE_VALUES,
  issueClient,
  loggedRequests,
  nonEmptySubsets,
  loginToken,
  signTestToken,
  uniqueId,
  updateClient,
} from "../../support/api.ts";
import {
  type SeededReceipt,
  auditRows,
  deleteHeadersFor,
  expectSignedPush,
  outboxRows,
  receiptExists,
  seedReceipt,
  waitForDelivery,
  waitForPushes,
} from "../../support/notices.ts";
import { PATHS } from "../../../src/shared/paths.ts";
import { SHARDS, idOn } from "../../support/shards.ts";
import { shardOfId } from "../../../src/storage/shards.ts";

const HEADER_NAMES = ["Authorization", "receipt_id", "client_id", "chain_id", "app_user_id"] as const;
const OWNER_FIELDS = ["client_id", "chain_id", "app_user_id"] as const;

/** A client with a token and one receipt of its own. */
async function owner(): Promise<{ client: TestClient; token: string; receipt: SeededReceipt }> {
  const client = await issueClient();
  const token = await loginToken(client);
  return { client, token, receipt: await seedReceipt(client) };
}

/**
 * docs/api.md#receipt-states, #delete and #audit: after a refusal the receipt is still there, and
 * no notice and no audit record exist.
 */
async function expectUntouched(receipt: SeededReceipt): Promise<void> {
  expect(await receiptExists(receipt.receipt_id)).toBe(true);
  expect(await outboxRows(receipt.receipt_id)).toEqual([]);
  expect(await auditRows(receipt.receipt_id)).toEqual([]);
}

describe("docs/api.md#delete delete success", () => {
  it("answers 200 with the documented body, removes the receipt and records one notice", async () => {
    const { token, receipt } = await owner();
    const answer = await call(PATHS.delete, { headers: deleteHeadersFor(token, receipt) });
    expect(answer.status).toBe(200);
    expect(answer.headers.get("content-type")).toBe("application/json; charset=utf-8");
    expect(answer.body).toEqual({
      message: `Receipt ${receipt.receipt_id} was deleted and the app user notified.`,
      status: "OK",
      status_code: 200,
    });
    expect(await receiptExists(receipt.receipt_id)).toBe(false);
    const rows = await outboxRows(receipt.receipt_id);
    expect(rows).toHaveLength(1);
    expect(rows[0]!.event_id).toMatch(EVENT_ID_PATTERN);
  });

  it("docs/api.md#deletion-notices: the notice is the documented message, and exactly one signed webhook reaches the push service", async () => {
    const { token, receipt } = await owner();
    expect((await call(PATHS.delete, { headers: deleteHeadersFor(token, receipt) })).status).toBe(200);
    const [push] = await waitForPushes(receipt.receipt_id);
    const notice = await expectSignedPush(push!);
    expect(Object.keys(notice)).toEqual(["event_id", "type", "occurred_at", "receipt_id", "app_user_id", "chain_id", "client_id"]);
    expect(notice).toEqual({
      event_id: expect.stringMatching(EVENT_ID_PATTERN),
      type: "receipt.deleted",
      occurred_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
      receipt_id: receipt.receipt_id,
      app_user_id: receipt.app_user_id,
      chain_id: receipt.chain_id,
      client_id: receipt.client_id,
    });
    const [row] = await outboxRows(receipt.receipt_id);
    expect(row).toMatchObject({ event_id: notice.event_id, payload: push!.body, attempts: 1 });
    expect(row!.enqueued_at).not.toBeNull();
    await waitForDelivery(receipt.receipt_id);
    // Still one push once the delivery is recorded.
    expect(await waitForPushes(receipt.receipt_id)).toHaveLength(1);
  });

  it("reads header names case-insensitively", async () => {
    const { token, receipt } = await owner();
    const headers = Object.fromEntries(
      Object.entries(deleteHeadersFor(token, receipt)).map(([name, value]) => [name.toUpperCase(), value]),
    );
    expect((await call(PATHS.delete, { headers })).status).toBe(200);
  });

  it("a second delete of the same receipt: 406, and still one notice", async () => {
    const { token, receipt } = await owner();
    expect((await call(PATHS.delete, { headers: deleteHeadersFor(token, receipt) })).status).toBe(200);
    const again = await call(PATHS.delete, { headers: deleteHeadersFor(token, receipt) });
    expect(expectErrorShape(again, 406, "Not Acceptable")).toContain("receipt_id");
    expect(await outboxRows(receipt.receipt_id)).toHaveLength(1);
  });
});

describe("docs/api.md#delete-errors delete errors: 400 a required header is missing", () => {
  it.each(nonEmptySubsets(HEADER_NAMES).map((names) => [names.join("+"), names] as const))(
    "without %s: 400 naming every missing header, nothing deleted",
    async (_label, missing) => {
      const { token, receipt } = await owner();
      const headers = deleteHeadersFor(token, receipt);
      for (const name of missing) delete headers[name];
      const message = expectErrorShape(await call(PATHS.delete, { headers }), 400, "Bad Request");
      expectNamesMissing(message, missing, HEADER_NAMES);
      await expectUntouched(receipt);
    },
  );
});

describe("docs/api.md#delete-errors delete errors: 406 a header value is not a string", () => {
  for (const name of HEADER_NAMES) {
    // docs/api.md#common-rules: Authorization has no length rule; an over-long token is an invalid one (403).
    const cases = UNUSABLE_VALUES.filter(([label]) => name !== "Authorization" || !label.startsWith("longer"));
    it.each(cases)(`${name} %s: 406 naming ${name}, nothing deleted`, async (_label, value) => {
      const { token, receipt } = await owner();
      const headers = { ...deleteHeadersFor(token, receipt), [name]: value };
      // workerd drops an empty Authorization between a caller and the Worker (it then counts as
      // missing, 400); the app itself is asked directly what it makes of one that does arrive.
      const answer = name === "Authorization" && value.trim() === "" ? await callApp(headers) : await call(PATHS.delete, { headers });
      const message = expectErrorShape(answer, 406, "Not Acceptable");
      expect(message).toContain(name);
      expectRemark(message);
      await expectUntouched(receipt);
    });
  }

  it("names every unusable header at once", async () => {
    const { token, receipt } = await owner();
    const headers = { ...deleteHeadersFor(token, receipt), chain_id: "", app_user_id: "caf\u00e9" };
    const message = expectErrorShape(await call(PATHS.delete, { headers }), 406, "Not Acceptable");
    expect(message).toContain("chain_id");
    expect(message).toContain("app_user_id");
    await expectUntouched(receipt);
  });

  it("an Authorization longer than 256 characters is an invalid token: 403", async () => {
    const { token, receipt } = await owner();
    const headers = { ...deleteHeadersFor(token, receipt), Authorization: `Bearer ${"x".repeat(300)}` };
    expect(expectErrorShape(await call(PATHS.delete, { headers }), 403, "Forbidden")).toContain("Authorization");
    await expectUntouched(receipt);
  });
});

describe("docs/api.md#delete-errors delete errors: 403 Forbidden", () => {
  it("an unknown client_id: 403 naming client_id as unknown", async () => {
    const { receipt } = await owner();
    const stranger = uniqueId("pos-unknown");
    const token = await signTestToken({ sub: stranger });
    const answer = await call(PATHS.delete, { headers: { ...deleteHeadersFor(token, receipt), client_id: stranger } });
    const message = expectErrorShape(answer, 403, "Forbidden");
    expect(message).toMatch(/client_id is unknown/);
    await expectUntouched(receipt);
  });

  it("an expired authorization: 403 saying a fresh token must be generated", async () => {
    const { client, receipt } = await owner();
    const hourAgo = Math.floor(Date.now() / 1000) - 3700;
    const token = await signTestToken({ sub: client.clientId, iat: hourAgo, exp: hourAgo + 3600 });
    const message = expectErrorShape(await call(PATHS.delete, { headers: deleteHeadersFor(token, receipt) }), 403, "Forbidden");
    expect(message).toContain("expired");
    expect(message).toMatch(/fresh token/);
    await expectUntouched(receipt);
  });

  it("docs/api.md#delete: the token of another client: 403 naming client_id", async () => {
    const { receipt } = await owner();
    const other = await issueClient();
    const token = await loginToken(other);
    const message = expectErrorShape(await call(PATHS.delete, { headers: deleteHeadersFor(token, receipt) }), 403, "Forbidden");
    expect(message).toContain("client_id");
    await expectUntouched(receipt);
  });

  it("docs/api.md#login: a disabled client's live token: 403 naming client_id", async () => {
    const { client, token, receipt } = await owner();
    await updateClient(client.clientId, { disabled: true });
    const message = expectErrorShape(await call(PATHS.delete, { headers: deleteHeadersFor(token, receipt) }), 403, "Forbidden");
    expect(message).toContain("client_id");
    await expectUntouched(receipt);
  });

  const invalidTokens: [string, (clientId: string) => Promise<string>][] = [
    ["not a JWT", async () => "not-a-token"],
    ["a wrong audience", (sub) => signTestToken({ sub, aud: "someone-else" })],
    ["a wrong issuer", (sub) => signTestToken({ sub, iss: "https://elsewhere.example" })],
    ["an unknown kid", (sub) => signTestToken({ sub }, { kid: "nobody" })],
    ["alg none", async (sub) => `${btoa(JSON.stringify({ alg: "none", typ: "JWT" }))}.${btoa(JSON.stringify({ sub }))}.`],
    ["a forged signature", async (sub) => `${(await signTestToken({ sub })).slice(0, -4)}AAAA`],
  ];
  it.each(invalidTokens)("a token with %s: 403 naming Authorization", async (_label, makeToken) => {
    const { client, receipt } = await owner();
    const headers = deleteHeadersFor(await makeToken(client.clientId), receipt);
    expect(expectErrorShape(await call(PATHS.delete, { headers }), 403, "Forbidden")).toContain("Authorization");
    await expectUntouched(receipt);
  });

  it("an Authorization without the Bearer scheme: 403 naming Authorization", async () => {
    const { token, receipt } = await owner();
    const headers = { ...deleteHeadersFor(token, receipt), Authorization: `Basic ${token}` };
    expect(expectErrorShape(await call(PATHS.delete, { headers }), 403, "Forbidden")).toContain("Authorization");
    await expectUntouched(receipt);
  });
});

describe("docs/api.md#delete-errors delete errors: 406 the receipt", () => {
  it("no document under receipt_id: 406 naming receipt_id", async () => {
    const { token, receipt } = await owner();
    const headers = { ...deleteHeadersFor(token, receipt), receipt_id: crypto.randomUUID() };
    const message = expectErrorShape(await call(PATHS.delete, { headers }), 406, "Not Acceptable");
    expect(message).toContain("receipt_id");
    expectRemark(message);
    await expectUntouched(receipt);
  });

  // Once client_id differs it is named alone (test/api/routes/delete-disclosure.test.ts).
  it.each(nonEmptySubsets(OWNER_FIELDS).map((fields) => [fields.join("+"), fields] as const))(
    "%s differing from the receipt: 406 naming each differing field (client_id alone if it differs) and no other",
    async (_label, differingFields) => {
      const differing = differingFields.includes("client_id") ? ["client_id"] : differingFields;
      // The caller authenticates as itself; the receipt carries other values in the differing fields.
      const caller = await issueClient();
      const token = await loginToken(caller);
      const headers = {
        Authorization: `Bearer ${token}`,
        receipt_id: idOn(),
        client_id: caller.clientId,
        chain_id: caller.chains[0]!,
        app_user_id: uniqueId("au"),
      };
      const receipt = await seedReceipt(caller, {
        receipt_id: headers.receipt_id,
        client_id: differingFields.includes("client_id") ? (await issueClient()).clientId : headers.client_id,
        chain_id: differingFields.includes("chain_id") ? uniqueId("chain-other") : headers.chain_id,
        app_user_id: differingFields.includes("app_user_id") ? uniqueId("au-other") : headers.app_user_id,
      });
      const message = expectErrorShape(await call(PATHS.delete, { headers }), 406, "Not Acceptable");
      for (const field of differing) expect(message).toContain(field);
      for (const field of OWNER_FIELDS.filter((f) => !differing.includes(f))) {
        expect(message).not.toMatch(new RegExp(`\\b${field}\\b`));
      }
      // The receipt's own values belong to someone else and are not shown.
      for (const field of differingFields) expect(message).not.toContain(receipt[field]);
      expectRemark(message);
      await expectUntouched(receipt);
    },
  );
});

describe("docs/api.md#delete-errors order of checks", () => {
  it("a missing header wins over an unusable one (400)", async () => {
    const { token, receipt } = await owner();
    const headers: Record<string, string> = { ...deleteHeadersFor(token, receipt), chain_id: "" };
    delete headers.app_user_id;
    expectErrorShape(await call(PATHS.delete, { headers }), 400, "Bad Request");
  });

  it("an unusable header wins over an invalid token (406)", async () => {
    const { receipt } = await owner();
    const headers = { ...deleteHeadersFor("garbage", receipt), app_user_id: " " };
    expectErrorShape(await call(PATHS.delete, { headers }), 406, "Not Acceptable");
  });

  it("an invalid token wins over an unknown client_id (403 naming Authorization)", async () => {
    const { receipt } = await owner();
    const headers = { ...deleteHeadersFor("garbage", receipt), client_id: uniqueId("nobody") };
    const message = expectErrorShape(await call(PATHS.delete, { headers }), 403, "Forbidden");
    expect(message).toContain("Authorization");
    expect(message).not.toContain("client_id");
  });

  it("the token is checked before the receipt: another client's token on a missing receipt is 403", async () => {
    const { receipt } = await owner();
    const token = await loginToken(await issueClient());
    const headers = { ...deleteHeadersFor(token, receipt), receipt_id: crypto.randomUUID() };
    expectErrorShape(await call(PATHS.delete, { headers }), 403, "Forbidden");
  });

  it("a missing receipt is reported as such, not as differing fields", async () => {
    const { token, receipt } = await owner();
    const headers = { ...deleteHeadersFor(token, receipt), receipt_id: crypto.randomUUID(), chain_id: "other" };
    const message = expectErrorShape(await call(PATHS.delete, { headers }), 406, "Not Acceptable");
    expect(message).toContain("receipt_id");
    expect(message).not.toContain("chain_id");
  });
});

describe("docs/api.md#audit every successful delete leaves exactly one audit record", () => {
  it("when, what, the receipt, its chain, client and app user, and the request reference, written with the deletion", async () => {
    const { token, receipt } = await owner();
    const ray = "8c1f2d3e4a5b6c7d-AMS";
    const answer = await call(PATHS.delete, { headers: { ...deleteHeadersFor(token, receipt), "cf-ray": ray } });
    expect(answer.status).toBe(200);
    const [notice] = await outboxRows(receipt.receipt_id);
    expect(await auditRows(receipt.receipt_id)).toEqual([
      {
        audit_id: expect.any(Number),
        at: JSON.parse(notice!.payload).occurred_at,
        action: "receipt.deleted",
        receipt_id: receipt.receipt_id,
        chain_id: receipt.chain_id,
        client_id: receipt.client_id,
        app_user: receipt.app_user_id,
        request_id: ray,
      },
    ]);
  });

  it("without a cf-ray, the reference is the one the request's log line and a 500 would quote", async () => {
    const { token, receipt } = await owner();
    const [line] = await loggedRequests(() => call(PATHS.delete, { headers: deleteHeadersFor(token, receipt) }));
    expect(line).toMatchObject({ route: PATHS.delete, status: 200 });
    expect((await auditRows(receipt.receipt_id)).map((record) => record.request_id)).toEqual([line!.request_id]);
  });
});

describe("docs/api.md#common-rules delete answers POST only", () => {
  it.each(["GET", "PUT", "DELETE", "PATCH"])("%s: 405 with Allow: POST and a message saying to use POST", async (method) => {
    const { token, receipt } = await owner();
    const answer = await call(PATHS.delete, { method, headers: deleteHeadersFor(token, receipt) });
    expect(expectErrorShape(answer, 405, "Method Not Allowed")).toContain("use POST");
    expect(answer.headers.get("allow")).toBe("POST");
    await expectUntouched(receipt);
  });
});

describe("docs/api.md#atomicity delete atomicity", () => {
  it("20 racing deletes of one receipt: one 200, nineteen 406, one notice, one push", async () => {
    const { token, receipt } = await owner();
    const answers = await Promise.all(
      Array.from({ length: 20 }, () => call(PATHS.delete, { headers: deleteHeadersFor(token, receipt) })),
    );
    const statuses = answers.map((answer) => answer.status).sort();
    expect(statuses).toEqual([200, ...Array<number>(19).fill(406)]);
    for (const answer of answers.filter((a) => a.status === 406)) {
      expect(expectErrorShape(answer, 406, "Not Acceptable")).toContain("receipt_id");
    }
    expect(await receiptExists(receipt.receipt_id)).toBe(false);
    expect(await outboxRows(receipt.receipt_id)).toHaveLength(1);
    expect(await auditRows(receipt.receipt_id)).toHaveLength(1);
    await waitForDelivery(receipt.receipt_id);
    expect(await waitForPushes(receipt.receipt_id)).toHaveLength(1);
  });

  it("a D1 failure: 500 with a reference and no internals, and nothing changed", async () => {
    const { token, receipt } = await owner();
    const shard = shardOfId(SHARDS, receipt.receipt_id)!;
    const failingDb = new Proxy(shard.db, {
      get(target, property) {
        if (property === "batch") return () => Promise.reject(new Error("D1_ERROR: database is locked"));
        const value = Reflect.get(target, property, target);
        return typeof value === "function" ? value.bind(target) : value;
      },
    });
    const ctx = createExecutionContext();
    const response = await createApp().fetch(
      new Request(BASE + PATHS.delete, { method: "POST", headers: deleteHeadersFor(token, receipt) }),
      { ...env, [shard.binding]: failingDb },
      ctx,
    );
    await waitOnExecutionContext(ctx);
    const body = (await response.json()) as { message: string; status: string };
    expect(response.status).toBe(500);
    expect(body.status).toBe("Internal Server Error");
    expect(body.message).toMatch(/reference [0-9a-f-]{36}/);
    expect(body.message).not.toMatch(/D1|locked|batch|DB/);
    await expectUntouched(receipt);
  });
});

describe("cost budget of a successful delete", () => {
  it("response path: one KV read and one D1 round trip; only the queue send comes after, no second D1 write", async () => {
    const { token, receipt } = await owner();
    const { answer, ledger } = await countedCall(PATHS.delete, { headers: deleteHeadersFor(token, receipt) });
    expect(answer.status).toBe(200);
    expect(ledger.names("response")).toEqual(["kv.get", "d1.batch"]);
    expect(ledger.names("after")).toEqual(["queue.send"]);
  });
});

/** Calls a fresh app with the test bindings, past the runtime's own header handling. */
async function callApp(headers: Record<string, string>): Promise<Answer> {
  const ctx = createExecutionContext();
  const response = await createApp().fetch(new Request(BASE + PATHS.delete, { method: "POST", headers }), env, ctx);
  await waitOnExecutionContext(ctx);
  return { status: response.status, headers: response.headers, body: await response.json() };
}
