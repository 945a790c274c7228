import { env } from "cloudflare:workers";
import { decodeJwt, decodeProtectedHeader } from "jose";
import { describe, expect, it } from "vitest";
import { createApp } from "../../../src/api/app.ts";
import { hashClientSecret } from "../../../src/shared/secrets.ts";
import { TEST_TOKEN_KEYS } from "../../support/keys.ts";
import {
  BASE,
  call,
  expectErrorShape,
  expectNamesMissing,
  UNUSABLE_VALUES,
  issueClient,
  loginHeadersFor,
  loginToken,
  nonEmptySubsets,
  uniqueId,
  updateClient,
  type Answer,
} from "../../support/api.ts";
import { PATHS } from "../../../src/shared/paths.ts";

const HEADER_NAMES = ["client_id", "client_secret", "token_type", "scope"] as const;

describe("docs/api.md#login login success", () => {
  it("answers 200 with the documented body and a one-hour Bearer token", async () => {
    const client = await issueClient();
    const answer = await call(PATHS.login, { headers: loginHeadersFor(client) });
    expect(answer.status).toBe(200);
    expect(answer.headers.get("content-type")).toBe("application/json; charset=utf-8");
    expect(answer.headers.get("cache-control")).toBe("no-store");
    expect(answer.body).toEqual({
      data: { access_token: expect.any(String), expires_in: 3600, token_type: "Bearer" },
      status: "OK",
      status_code: 200,
    });
  });

  it("docs/api.md#login: signs HS256 with the first key's kid, and carries sub, scope, iss, aud, jti, exp = iat + 3600", async () => {
    const client = await issueClient();
    const before = Math.floor(Date.now() / 1000);
    const token = await loginToken(client);
    expect(decodeProtectedHeader(token)).toMatchObject({ alg: "HS256", kid: TEST_TOKEN_KEYS.keys[0]!.kid });
    const claims = decodeJwt(token);
    expect(claims).toMatchObject({
      sub: client.clientId,
      scope: "service.pos",
      iss: env.TOKEN_ISSUER,
      aud: env.TOKEN_AUDIENCE,
    });
    expect(claims.exp! - claims.iat!).toBe(3600);
    expect(claims.iat).toBeGreaterThanOrEqual(before);
    expect(claims.jti).toMatch(/^[0-9a-f-]{36}$/);
    expect(decodeJwt(await loginToken(client)).jti).not.toBe(claims.jti);
  });

  it("reads header names case-insensitively", async () => {
    const client = await issueClient();
    const answer = await call(PATHS.login, {
      headers: { CLIENT_ID: client.clientId, Client_Secret: client.secret, TOKEN_TYPE: "Bearer", Scope: "service.pos" },
    });
    expect(answer.status).toBe(200);
  });

  it("ignores a body, which the documented samples never send", async () => {
    const client = await issueClient();
    const answer = await call(PATHS.login, { headers: loginHeadersFor(client), body: "{}" });
    expect(answer.status).toBe(200);
  });
});

describe("docs/api.md#login-errors login errors: 400 missing headers", () => {
  it.each(nonEmptySubsets(HEADER_NAMES).map((names) => [names.join("+"), names] as const))(
    "without %s: 400 naming every missing header",
    async (_label, missing) => {
      const client = await issueClient();
      const headers = loginHeadersFor(client);
      for (const name of missing) delete headers[name];
      const message = expectErrorShape(await call(PATHS.login, { headers }), 400, "Bad Request");
      expectNamesMissing(message, missing, HEADER_NAMES);
    },
  );
});

describe("docs/api.md#login-errors login errors: 406 a header value is not a string", () => {
  for (const name of HEADER_NAMES) {
    it.each(UNUSABLE_VALUES)(`${name} %s: 406 naming ${name}`, async (_label, value) => {
      const client = await issueClient();
      const headers = { ...loginHeadersFor(client), [name]: value };
      const message = expectErrorShape(await call(PATHS.login, { headers }), 406, "Not Acceptable");
      expect(message).toContain(name);
      expect(message).toContain("invalid syntax");
    });
  }

  it("accepts exactly 256 characters as a string (then refuses the unknown client with 403)", async () => {
    const client = await issueClient();
    const answer = await call(PATHS.login, { headers: { ...loginHeadersFor(client), client_id: "c".repeat(256) } });
    expectErrorShape(answer, 403, "Not Acceptable");
  });
});

describe("docs/api.md#login-errors login errors: 403 carries the status word Not Acceptable", () => {
  it("docs/api.md#login: token_type other than Bearer names token_type", async () => {
    const client = await issueClient();
    const answer = await call(PATHS.login, { headers: { ...loginHeadersFor(client), token_type: "MAC" } });
    expect(expectErrorShape(answer, 403, "Not Acceptable")).toContain("token_type");
  });

  it("docs/api.md#login: scope other than service.pos names scope", async () => {
    const client = await issueClient();
    const answer = await call(PATHS.login, { headers: { ...loginHeadersFor(client), scope: "service.admin" } });
    expect(expectErrorShape(answer, 403, "Not Acceptable")).toContain("scope");
  });

  it("docs/api.md#login: a scope missing from the client's record names scope", async () => {
    const client = await issueClient({ scopes: [] });
    const answer = await call(PATHS.login, { headers: loginHeadersFor(client) });
    expect(expectErrorShape(answer, 403, "Not Acceptable")).toContain("scope");
  });

  it("docs/api.md#login: an unknown client_id and a wrong client_secret get the same answer, naming both", async () => {
    const client = await issueClient();
    const wrongSecret = await call(PATHS.login, { headers: { ...loginHeadersFor(client), client_secret: "not-it" } });
    const unknown = await call(PATHS.login, { headers: { ...loginHeadersFor(client), client_id: uniqueId("nobody") } });
    expect(expectErrorShape(wrongSecret, 403, "Not Acceptable")).toContain("client_id");
    expect(wrongSecret.body.message).toContain("client_secret");
    expect(unknown.body).toEqual(wrongSecret.body);
    expect([...unknown.headers]).toEqual([...wrongSecret.headers]);
  });

  it("docs/api.md#login: a disabled client cannot log in", async () => {
    const client = await issueClient({ disabled: true });
    const answer = await call(PATHS.login, { headers: loginHeadersFor(client) });
    expect(expectErrorShape(answer, 403, "Not Acceptable")).toContain("client_id");
  });

  it("docs/api.md#operators: after a rotation the old secret fails at the next login and the new one works", async () => {
    const client = await issueClient();
    expect((await call(PATHS.login, { headers: loginHeadersFor(client) })).status).toBe(200);
    const newSecret = "rotated-secret-".padEnd(43, "x");
    await updateClient(client.clientId, { secret_hash: await hashClientSecret(newSecret) });
    expectErrorShape(await call(PATHS.login, { headers: loginHeadersFor(client) }), 403, "Not Acceptable");
    const rotated = await call(PATHS.login, { headers: { ...loginHeadersFor(client), client_secret: newSecret } });
    expect(rotated.status).toBe(200);
  });

  it("docs/api.md#operators: disabling a client stops the next login; enabling restores it", async () => {
    const client = await issueClient();
    await updateClient(client.clientId, { disabled: true });
    expectErrorShape(await call(PATHS.login, { headers: loginHeadersFor(client) }), 403, "Not Acceptable");
    await updateClient(client.clientId, { disabled: false });
    expect((await call(PATHS.login, { headers: loginHeadersFor(client) })).status).toBe(200);
  });
});

describe("docs/api.md#login failed logins are slowed down", () => {
  /** Fails a login with `headers` until the limiter answers 429 (or 12 tries), and returns every answer. */
  async function failUntilLimited(headers: Record<string, string>): Promise<Answer[]> {
    // The local limiter's window restarts on the minute: if that falls inside the loop, up to
    // 5 failures before it and 6 after it are needed.
    const answers = [await call(PATHS.login, { headers })];
    while (answers.length < 12 && answers.at(-1)!.status !== 429) answers.push(await call(PATHS.login, { headers }));
    return answers;
  }

  it("answers 429 with Retry-After once one client_id has failed too often", async () => {
    const client = await issueClient();
    const answers = await failUntilLimited({ ...loginHeadersFor(client), client_secret: "guess" });
    const last = answers.at(-1)!;
    expect(answers.slice(0, 5).map((answer) => answer.status)).toEqual([403, 403, 403, 403, 403]);
    expect(expectErrorShape(last, 429, "Too Many Requests")).toContain("client_id");
    // The limiter's period (wrangler.jsonc), as docs/api.md promises; never cached, as every answer.
    expect(last.headers.get("retry-after")).toBe("60");
    expect(last.headers.get("cache-control")).toBe("no-store");
  });

  it("an unknown client_id is limited alike, so a 429 tells nobody whether a client exists", async () => {
    const client = await issueClient();
    const known = await failUntilLimited({ ...loginHeadersFor(client), client_secret: "guess" });
    const unknown = await failUntilLimited({ ...loginHeadersFor(client), client_id: uniqueId("nobody") });
    expect(unknown[0]!.body).toEqual(known[0]!.body);
    expect(unknown.at(-1)!.status).toBe(429);
    expect(unknown.at(-1)!.body).toEqual(known.at(-1)!.body);
  });

  it("the right secret still logs in while its client_id is limited: guesses cannot lock a till out", async () => {
    const client = await issueClient();
    const answers = await failUntilLimited({ ...loginHeadersFor(client), client_secret: "guess" });
    expect(answers.at(-1)!.status).toBe(429);
    expect((await call(PATHS.login, { headers: loginHeadersFor(client) })).status).toBe(200);
  });

  it("does not count another client's failures", async () => {
    const noisy = await issueClient();
    for (let i = 0; i < 6; i += 1) {
      await call(PATHS.login, { headers: { ...loginHeadersFor(noisy), client_secret: "guess" } });
    }
    const quiet = await issueClient();
    expect((await call(PATHS.login, { headers: loginHeadersFor(quiet) })).status).toBe(200);
  });
});

describe("docs/api.md#common-rules common rules", () => {
  it.each(["GET", "PUT", "DELETE", "PATCH"])("%s on a known path: 405 with Allow: POST and a message saying to use POST", async (method) => {
    for (const path of [PATHS.login]) {
      const answer = await call(path, { method });
      const message = expectErrorShape(answer, 405, "Method Not Allowed");
      expect(answer.headers.get("allow")).toBe("POST");
      expect(message).toContain("POST");
    }
  });

  it("an unknown path: 404 in the error shape", async () => {
    for (const path of ["/receipts/v2/nothing", "/", "/receipts/v1/login", "/receipts/v2/login/"]) {
      expectErrorShape(await call(path), 404, "Not Found");
    }
  });

  it("a 500 shows no internals, only a reference that the log line carries too", async () => {
    const app = createApp();
    const logged: string[] = [];
    const original = console.error;
    console.error = (line: string) => logged.push(line);
    try {
      const response = await app.fetch(
        new Request(`${BASE}${PATHS.login}`, { method: "POST", headers: { client_id: "a", client_secret: "b", token_type: "Bearer", scope: "service.pos" } }),
        { ...env, TOKEN_KEYS: "{not json" },
      );
      const body = (await response.json()) as { message: string; status: string; status_code: number };
      expect(response.status).toBe(500);
      expect(body.status).toBe("Internal Server Error");
      expect(body.status_code).toBe(500);
      expect(body.message).not.toMatch(/TOKEN_KEYS|JSON|\n\s+at |ConfigError/);
      const reference = /reference ([0-9a-f-]{36})/.exec(body.message)?.[1];
      expect(reference).toBeDefined();
      const line = JSON.parse(logged.find((l) => l.includes(reference!))!);
      expect(line).toMatchObject({ level: "error", status: 500, request_id: reference });
      expect(line.cause).toContain("TOKEN_KEYS");
    } finally {
      console.error = original;
    }
  });
});
