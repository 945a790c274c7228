/** add: refusals of its headers (400, 406) and of who is calling for which chain (403). */
import { createExecutionContext } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { createApp } from "../../../src/api/app.ts";
import {
  BASE,
  expectNamesMissing,
  UNUSABLE_VALUES,
  issueClient,
  nonEmptySubsets,
  expectRefused,
  newCaller,
  postAdd,
  signTestToken,
  uniqueId,
  updateClient,
  validReceiptBody,
  type Answer,
} from "../../support/api.ts";
import { PATHS } from "../../../src/shared/paths.ts";

const REQUIRED_HEADERS = ["Authorization", "client_id", "chain_id", "app_user_id", "Content-Type"] as const;

describe("docs/api.md#common-rules add header errors: 400 missing headers", () => {
  it.each(nonEmptySubsets(REQUIRED_HEADERS).map((names) => [names.join("+"), names] as const))(
    "without %s: 400 naming every missing header and nothing stored",
    async (_label, missing) => {
      const { headers } = await newCaller();
      for (const name of missing) delete headers[name];
      const message = await expectRefused(() => postAdd(headers), 400, "Bad Request");
      expectNamesMissing(message, missing, REQUIRED_HEADERS);
    },
  );

  it("comes before every other check: a missing header with a bad token and body is a 400", async () => {
    const { headers } = await newCaller();
    delete headers.app_user_id;
    const message = await expectRefused(
      () => postAdd({ ...headers, Authorization: "Bearer nonsense", "Content-Type": "text/plain" }, "{"),
      400,
      "Bad Request",
    );
    expect(message).toContain("app_user_id");
  });
});

describe("docs/api.md#common-rules add header errors: 406 a header value is not a string", () => {
  const cases = [...REQUIRED_HEADERS, "Idempotency-Key"].flatMap((name) =>
    UNUSABLE_VALUES
      .filter(([label]) => !(name === "Authorization" && label.startsWith("longer")))
      .map(([label, value]) => [name, label, value] as const),
  );
  // workerd hands the Worker an empty Authorization or Content-Type as no header at all.
  const droppedByRuntime = (name: string, value: string) =>
    (name === "Authorization" || name === "Content-Type") && value.trim() === "";

  it.each(cases.filter(([name, , value]) => !droppedByRuntime(name, value)))(
    "%s %s: 406 naming it and nothing stored",
    async (name, _label, value) => {
      const { headers } = await newCaller();
      const message = await expectRefused(() => postAdd({ ...headers, [name]: value }), 406, "Not Acceptable");
      expect(message).toContain(name);
      expect(message).toContain("invalid syntax");
    },
  );

  it.each(cases.filter(([name, , value]) => droppedByRuntime(name, value)))(
    "%s %s: arrives as missing (400); the app itself would answer 406",
    async (name, _label, value) => {
      const { headers } = await newCaller();
      const changed = { ...headers, [name]: value };
      expect(await expectRefused(() => postAdd(changed), 400, "Bad Request")).toContain(`${name} is missing`);
      const direct = async (): Promise<Answer> => {
        const request = new Request(BASE + PATHS.add, { method: "POST", headers: changed, body: JSON.stringify(validReceiptBody()) });
        const response = await createApp().fetch(request, env, createExecutionContext());
        return { status: response.status, headers: response.headers, body: await response.json() };
      };
      expect(await expectRefused(direct, 406, "Not Acceptable")).toContain(name);
    },
  );

  it("names every unusable header in one 406", async () => {
    const { headers } = await newCaller();
    const message = await expectRefused(
      () => postAdd({ ...headers, chain_id: " ", app_user_id: "a\u0007b" }),
      406,
      "Not Acceptable",
    );
    expect(message).toContain("chain_id");
    expect(message).toContain("app_user_id");
  });

  it("Idempotency-Key: 256 characters are refused, 255 and 1 accepted", async () => {
    const { headers } = await newCaller();
    const message = await expectRefused(
      () => postAdd({ ...headers, "Idempotency-Key": "k".repeat(256) }),
      406,
      "Not Acceptable",
    );
    expect(message).toContain("Idempotency-Key");
    expect(message).toContain("255");
    expect((await postAdd({ ...headers, "Idempotency-Key": "k".repeat(255) })).status).toBe(200);
    expect((await postAdd({ ...headers, "Idempotency-Key": "k" })).status).toBe(200);
  });

  it("Authorization is exempt from the length rule: an over-long token is a 403", async () => {
    const { headers } = await newCaller();
    const message = await expectRefused(
      () => postAdd({ ...headers, Authorization: `Bearer ${"x".repeat(5000)}` }),
      403,
      "Forbidden",
    );
    expect(message).toContain("Authorization");
  });
});

describe("docs/api.md#add add authorisation: 403", () => {
  const now = () => Math.floor(Date.now() / 1000);

  it("a value that is not Bearer and a token: 403 naming Authorization", async () => {
    const { headers } = await newCaller();
    for (const authorization of ["Basic dXNlcjpwYXNz", "Bearer", "eyJhbGciOiJIUzI1NiJ9.e30.sig", "Bearer not-a-jwt"]) {
      const message = await expectRefused(() => postAdd({ ...headers, Authorization: authorization }), 403, "Forbidden");
      expect(message).toContain("Authorization");
    }
  });

  it("an expired token: 403 saying to generate a fresh token", async () => {
    const { client, headers } = await newCaller();
    const token = await signTestToken({ sub: client.clientId, iat: now() - 7200, exp: now() - 3600 });
    const message = await expectRefused(() => postAdd({ ...headers, Authorization: `Bearer ${token}` }), 403, "Forbidden");
    expect(message).toContain("expired");
    expect(message).toContain("fresh token");
  });

  it("a token for another audience or without the POS scope: 403", async () => {
    const { client, headers } = await newCaller();
    for (const claims of [{ aud: "someone-else" }, { scope: "service.admin" }]) {
      const token = await signTestToken({ sub: client.clientId, ...claims });
      const message = await expectRefused(() => postAdd({ ...headers, Authorization: `Bearer ${token}` }), 403, "Forbidden");
      expect(message).toContain("Authorization");
    }
  });

  it("a token of another client: 403 naming client_id", async () => {
    const owner = await newCaller();
    const other = await newCaller();
    const message = await expectRefused(
      () => postAdd({ ...owner.headers, Authorization: other.headers.Authorization! }),
      403,
      "Forbidden",
    );
    expect(message).toContain("client_id");
    expect(message).toContain("not the client the access token was issued to");
  });

  it("an unknown client_id: 403 naming client_id as unknown", async () => {
    const { headers } = await newCaller();
    const stranger = uniqueId("nobody");
    const token = await signTestToken({ sub: stranger });
    const message = await expectRefused(
      () => postAdd({ ...headers, client_id: stranger, Authorization: `Bearer ${token}` }),
      403,
      "Forbidden",
    );
    expect(message).toContain("client_id is unknown");
  });

  it("a disabled client: its live token is refused with 403", async () => {
    const { client, headers } = await newCaller();
    await updateClient(client.clientId, { disabled: true });
    const message = await expectRefused(() => postAdd(headers), 403, "Forbidden");
    expect(message).toContain("disabled");
  });

  it("a chain that is not the client's: 403 naming chain_id", async () => {
    const { headers } = await newCaller();
    const foreign = await issueClient();
    const message = await expectRefused(() => postAdd({ ...headers, chain_id: foreign.chains[0]! }), 403, "Forbidden");
    expect(message).toContain("chain_id");
  });

  it("comes before the body: a refused caller learns nothing about its body, type or size", async () => {
    const { headers } = await newCaller();
    const refusedChain = { ...headers, chain_id: uniqueId("chain") };
    await expectRefused(() => postAdd({ ...refusedChain, "Content-Type": "text/plain" }, "x".repeat(70_000)), 403, "Forbidden");
    await expectRefused(() => postAdd(refusedChain, "{"), 403, "Forbidden");
  });
});
