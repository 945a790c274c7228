/**
 * The structured request log. Operators see one JSON line per request with the
 * documented fields, and never a secret, a token or anything of a receipt's content.
 */
import { env } from "cloudflare:workers";
import { base64url } from "jose";
import { describe, expect, it } from "vitest";
import { createApp } from "../../src/api/app.ts";
import {
  BASE,
  call,
  consoleLines,
  issueClient,
  loginHeadersFor,
  loginToken,
  postAdd,
  signTestToken,
  uniqueId,
  validReceiptBody,
  type Answer,
} from "../support/api.ts";
import { PATHS } from "../../src/shared/paths.ts";

/** The fields of the request line (docs/api.md "Limits and hardening"). */
const REQUEST_LINE_FIELDS = [
  "time",
  "level",
  "event",
  "request_id",
  "method",
  "route",
  "status",
  "client_id",
  "latency_ms",
  "outcome",
  "cause",
];

describe("structured logs: one line per request, never a secret, a token or receipt content", () => {
  it("across login, add, delete and their refusals", async () => {
    // Everything that must stay out of the log carries this mark, so one search finds any leak.
    const mark = `zq${crypto.randomUUID().replaceAll("-", "").slice(0, 12)}`;
    const client = await issueClient();
    const token = await loginToken(client);
    const headers = {
      Authorization: `Bearer ${token}`,
      client_id: client.clientId,
      chain_id: client.chains[0]!,
      app_user_id: uniqueId("au"),
      "Content-Type": "application/json",
    };
    const markedBody = validReceiptBody();
    markedBody.line_items[0].description = `${mark} oat milk`;
    markedBody.line_items[0].sku = `${mark}-sku`;
    markedBody.store_id = `${mark}-store`;
    markedBody.pos_receipt_number = `${mark}-number`;
    markedBody.payments[0].method = `${mark}-card`;
    markedBody.metadata = { [`${mark}_key`]: `${mark}-value` };
    // A sum the 406 message tells the client: an amount of the receipt, so not for the log.
    const amountsBody = validReceiptBody();
    amountsBody.line_items = [{ description: "x", quantity: 1, unit_price: 987_654_321, total: 987_654_321 }];
    amountsBody.total = 1;

    const answers: Answer[] = [];
    const expiredToken = await signTestToken({ sub: client.clientId, iat: 0, exp: 1 });
    const markedAlg = `${base64url.encode(JSON.stringify({ alg: mark, kid: "x" }))}.e30.x`;

    // Each request, and whether it gets far enough (past its headers) to name its client.
    const requests: [string, () => Promise<Answer>, boolean][] = [
      ["login", () => call(PATHS.login, { headers: loginHeadersFor(client) }), true],
      ["login with a wrong secret", () => call(PATHS.login, { headers: { ...loginHeadersFor(client), client_secret: `${mark}-guess` } }), true],
      ["login with an unusable secret", () => call(PATHS.login, { headers: { ...loginHeadersFor(client), client_secret: `${mark}\tx` } }), false],
      ["login with a missing secret", () => call(PATHS.login, { headers: { client_id: client.clientId, token_type: "Bearer", scope: "service.pos" } }), false],
      ["add", () => postAdd(headers, markedBody), true],
      ["add with an Idempotency-Key", () => postAdd({ ...headers, "Idempotency-Key": `${mark}-key` }, markedBody), true],
      ["add reusing it for another body", () => postAdd({ ...headers, "Idempotency-Key": `${mark}-key` }, validReceiptBody()), true],
      [
        "add with marked values that break rules",
        () =>
          postAdd(headers, {
            ...markedBody,
            currency: mark,
            purchased_at: mark,
            [`${mark}_unknown`]: mark,
            metadata: { [`${mark}_long`]: mark.repeat(20) },
          }),
        true,
      ],
      ["add whose total is not the sum", () => postAdd(headers, amountsBody), true],
      ["add with a body that is not JSON", () => postAdd(headers, `{"${mark}": `), true],
      ["add with a token of marked garbage", () => postAdd({ ...headers, Authorization: `Bearer ${mark}.${mark}.${mark}` }), true],
      ["add with a marked kid", async () => postAdd({ ...headers, Authorization: `Bearer ${await signTestToken({ sub: client.clientId }, { kid: mark })}` }), true],
      ["add with a marked algorithm name", () => postAdd({ ...headers, Authorization: `Bearer ${markedAlg}` }), true],
      ["add with an expired token", () => postAdd({ ...headers, Authorization: `Bearer ${expiredToken}` }), true],
      ["add with a header of the wrong type", () => postAdd({ ...headers, app_user_id: `${mark}\u0001` }), false],
      ["add of another media type", () => postAdd({ ...headers, "Content-Type": "text/plain" }, mark), true],
      ["add of 65 KiB", () => postAdd(headers, mark.repeat(5000)), true],
      ["delete of the added receipt", () => call(PATHS.delete, { headers: deleteHeaders(answers[4]!) }), true],
      ["delete of it again", () => call(PATHS.delete, { headers: deleteHeaders(answers[4]!) }), true],
      ["delete naming another app user", () => call(PATHS.delete, { headers: { ...deleteHeaders(answers[5]!), app_user_id: `${mark}-user` } }), true],
      ["delete with a forged token", () => call(PATHS.delete, { headers: { ...deleteHeaders(answers[5]!), Authorization: `Bearer ${markedAlg}` } }), true],
      ["delete with an empty receipt_id", () => call(PATHS.delete, { headers: { ...deleteHeaders(answers[5]!), receipt_id: "" } }), false],
      ["GET on login", () => call(PATHS.login, { method: "GET", headers: loginHeadersFor(client) }), false],
      ["an unknown path", () => call("/receipts/v2/nothing", { headers: loginHeadersFor(client) }), false],
    ];

    // The delete headers for the receipt an earlier add answered with.
    const deleteHeaders = (added: Answer) => ({
      Authorization: headers.Authorization,
      receipt_id: added.body.data.receipt_id,
      client_id: client.clientId,
      chain_id: headers.chain_id,
      app_user_id: headers.app_user_id,
    });
    let failed: Response | undefined;
    const lines = await consoleLines(async () => {
      for (const [, send] of requests) answers.push(await send());
      // A 500: the settings are broken, and the caller's secret is in the request.
      failed = await createApp().fetch(new Request(BASE + PATHS.login, { method: "POST", headers: loginHeadersFor(client) }), {
        ...env,
        TOKEN_KEYS: "{",
      });
      await failed.text();
    });

    // Each request met the refusal it was written for, so the log saw every path.
    expect(Object.fromEntries(requests.map(([label], index) => [label, answers[index]!.status]))).toEqual({
      login: 200,
      "login with a wrong secret": 403,
      "login with an unusable secret": 406,
      "login with a missing secret": 400,
      add: 200,
      "add with an Idempotency-Key": 200,
      "add reusing it for another body": 409,
      "add with marked values that break rules": 406,
      "add whose total is not the sum": 406,
      "add with a body that is not JSON": 406,
      "add with a token of marked garbage": 403,
      "add with a marked kid": 403,
      "add with a marked algorithm name": 403,
      "add with an expired token": 403,
      "add with a header of the wrong type": 406,
      "add of another media type": 415,
      "add of 65 KiB": 413,
      "delete of the added receipt": 200,
      "delete of it again": 406,
      "delete naming another app user": 406,
      "delete with a forged token": 403,
      "delete with an empty receipt_id": 406,
      "GET on login": 405,
      "an unknown path": 404,
    });
    const secrets = [client.secret, token, ...token.split(".").slice(1), expiredToken.split(".")[2]!, mark, "987654321"];
    for (const line of lines) for (const secret of secrets) expect(line).not.toContain(secret);

    const requestLines = lines.map((line) => JSON.parse(line)).filter((line) => line.event === "request");
    const statuses = [...answers.map((answer) => answer.status), failed!.status];
    expect(requestLines.map((line) => line.status)).toEqual(statuses);
    expect(new Set(requestLines.map((line) => line.request_id)).size).toBe(statuses.length);
    for (const line of requestLines) {
      expect(REQUEST_LINE_FIELDS).toEqual(expect.arrayContaining(Object.keys(line)));
      expect(line).toMatchObject({
        time: expect.stringMatching(/^\d{4}-\d\d-\d\dT[\d:.]+Z$/),
        level: line.status >= 500 ? "error" : "info",
        request_id: expect.stringMatching(/^[0-9a-f-]{36}$/),
        method: expect.stringMatching(/^(POST|GET)$/),
        route: expect.stringMatching(/^\/receipts\/v2\//),
        latency_ms: expect.any(Number),
        outcome: line.status < 400 ? "ok" : line.status >= 500 ? "failed" : "refused",
      });
      if (line.status >= 400) expect(line.cause).toEqual(expect.any(String));
    }
    for (const [index, [label, , namesClient]] of requests.entries()) {
      if (namesClient) expect(requestLines[index].client_id, label).toBe(client.clientId);
    }
  });

  it("uses Cloudflare's ray ID as the request reference only in its own shape", async () => {
    const ray = "8f1c2a3b4d5e6f70-FRA";
    const lines = await consoleLines(async () => {
      await call("/receipts/v2/nothing", { headers: { "cf-ray": ray } });
      await call("/receipts/v2/nothing", { headers: { "cf-ray": `injected ${"x".repeat(5000)}` } });
    });
    const [trusted, refused] = lines.map((line) => JSON.parse(line));
    expect(trusted.request_id).toBe(ray);
    expect(refused.request_id).toMatch(/^[0-9a-f-]{36}$/);
  });
});
