/**
 * The POS client against the real API Worker inside workerd: its fetch is the Worker's own
 * fetch handler, with a recorder in between that can also lose an answer or fake a failure.
 */
import { env, exports } from "cloudflare:workers";
import { afterEach, describe, expect, it, vi } from "vitest";
import { ReceiptsClient, ReceiptsError, type FetchLike, type Receipt, type ReceiptsClientOptions } from "../../src/client/index.ts";
import { DOCUMENTED_OPERATIONS, DR_RETAIL_EXAMPLE } from "../../src/api/openapi/documented-operations.ts";
import { drRetailContentType } from "../../src/shared/dr-retail-profiles.ts";
import { PATHS } from "../../src/shared/paths.ts";
import { BASE, issueClient, signTestToken, uniqueId, type TestClient } from "../support/api.ts";
import { outboxRows, receiptExists } from "../support/notices.ts";
import { receiptsOf, storedReceipt } from "../support/shards.ts";
import { spend, withinOneWindow } from "../support/rate-limits.ts";
import { ratePolicy } from "../../src/shared/rate-limits.ts";

/** Decides one call instead of the Worker, or passes it on with `forward`. */
type Step = (request: Request, forward: () => Promise<Response>) => Promise<Response>;

/** The Worker's fetch, recording each call; `steps[path]` take the next calls to that path in turn. */
function workerFetch(steps: Partial<Record<string, Step[]>> = {}) {
  const calls: { path: string; headers: Headers }[] = [];
  const fetch: FetchLike = async (input, init) => {
    const request = new Request(input, init);
    const path = new URL(request.url).pathname;
    calls.push({ path, headers: new Headers(request.headers) });
    const forward = () => exports.default.fetch(request);
    const step = steps[path]?.shift();
    return step ? step(request, forward) : forward();
  };
  return { fetch, calls, count: (path: string) => calls.filter((call) => call.path === path).length };
}

function clientFor(client: TestClient, fetch: FetchLike, options: Partial<ReceiptsClientOptions> = {}): ReceiptsClient {
  return new ReceiptsClient({ baseUrl: BASE, clientId: client.clientId, clientSecret: client.secret, fetch, retry: { delayMs: 0 }, ...options });
}

function receipt(): Receipt {
  return structuredClone(DOCUMENTED_OPERATIONS[PATHS.add]!.body!.example as Receipt);
}

/** A login answer whose token the Worker will refuse as expired, though it says 3600 s. */
function expiredLogin(client: TestClient): Step {
  return async (_request, forward) => {
    const answer = (await (await forward()).json()) as { data: { access_token: string } };
    const now = Math.floor(Date.now() / 1000);
    answer.data.access_token = await signTestToken({ sub: client.clientId, iat: now - 7200, exp: now - 3600 });
    return Response.json(answer);
  };
}

const networkFailure: Step = async () => {
  throw new TypeError("fetch failed: connection reset");
};

/** The Worker stores the receipt, then the answer is lost on the way back. */
const answerLost: Step = async (request, forward) => {
  await (await forward()).text();
  return networkFailure(request, forward);
};

afterEach(() => {
  vi.restoreAllMocks();
});

describe("client: add and delete against the Worker", () => {
  it("logs in lazily, once, and reuses the token", async () => {
    const client = await issueClient();
    const recorder = workerFetch();
    const pos = clientFor(client, recorder.fetch);
    expect(recorder.calls).toHaveLength(0);
    const appUserId = uniqueId("au");
    const first = await pos.add(receipt(), { chainId: client.chains[0]!, appUserId });
    await pos.add(receipt(), { chainId: client.chains[0]!, appUserId });
    expect(recorder.calls.map((call) => call.path)).toEqual([PATHS.login, PATHS.add, PATHS.add]);
    expect(first).toEqual({
      receipt_id: expect.stringMatching(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/),
      chain_id: client.chains[0],
      client_id: client.clientId,
      app_user_id: appUserId,
      created_at: expect.any(String),
    });
    expect(await receiptsOf(client.clientId)).toBe(2);
  });

  it("delete removes the receipt, with its notice on the way", async () => {
    const client = await issueClient();
    const pos = clientFor(client, workerFetch().fetch);
    const appUserId = uniqueId("au");
    const added = await pos.add(receipt(), { chainId: client.chains[0]!, appUserId });
    const answer = await pos.delete({ receiptId: added.receipt_id, chainId: client.chains[0]!, appUserId });
    expect(answer).toEqual({
      message: `Receipt ${added.receipt_id} was deleted and the app user notified.`,
      status: "OK",
      status_code: 200,
    });
    expect(await receiptExists(added.receipt_id)).toBe(false);
    const events = (await outboxRows(added.receipt_id)).map((row) => JSON.parse(row.payload).type).sort();
    expect(events).toEqual(["receipt.created", "receipt.deleted"]);
  });

  it("concurrent first calls share one login", async () => {
    const client = await issueClient();
    const recorder = workerFetch();
    const pos = clientFor(client, recorder.fetch);
    await Promise.all(
      Array.from({ length: 5 }, () => pos.add(receipt(), { chainId: client.chains[0]!, appUserId: uniqueId("au") })),
    );
    expect(recorder.count(PATHS.login)).toBe(1);
    expect(recorder.count(PATHS.add)).toBe(5);
  });

  it("login() logs in at once and returns the token's data", async () => {
    const client = await issueClient();
    const recorder = workerFetch();
    const data = await clientFor(client, recorder.fetch).login();
    expect(data).toEqual({ access_token: expect.any(String), expires_in: 3600, token_type: "Bearer" });
    expect(recorder.calls[0]!.headers.get("client_secret")).toBe(client.secret);
  });
});

describe("client: token renewal", () => {
  it("renews the token a minute before it expires, not earlier", async () => {
    const client = await issueClient();
    const recorder = workerFetch();
    const pos = clientFor(client, recorder.fetch);
    const start = Date.now();
    const options = { chainId: client.chains[0]!, appUserId: uniqueId("au") };
    await pos.add(receipt(), options);
    // Only the client's clock moves: the Worker still sees the token as fresh.
    const clock = vi.spyOn(Date, "now").mockReturnValue(start + 3530 * 1000);
    await pos.add(receipt(), options);
    expect(recorder.count(PATHS.login)).toBe(1);
    clock.mockReturnValue(start + 3545 * 1000);
    await pos.add(receipt(), options);
    expect(recorder.count(PATHS.login)).toBe(2);
  });

  it("a token the Worker refuses as expired is renewed once and the call repeated", async () => {
    const client = await issueClient();
    const recorder = workerFetch({ [PATHS.login]: [expiredLogin(client)] });
    const pos = clientFor(client, recorder.fetch);
    const added = await pos.add(receipt(), { chainId: client.chains[0]!, appUserId: uniqueId("au") });
    expect(recorder.calls.map((call) => call.path)).toEqual([PATHS.login, PATHS.add, PATHS.login, PATHS.add]);
    expect(await receiptExists(added.receipt_id)).toBe(true);
    expect(await receiptsOf(client.clientId)).toBe(1);
  });

  it("renews only once: a second refusal reaches the caller as a ReceiptsError", async () => {
    const client = await issueClient();
    const recorder = workerFetch({ [PATHS.login]: [expiredLogin(client), expiredLogin(client)] });
    const pos = clientFor(client, recorder.fetch);
    const refusal = await pos.add(receipt(), { chainId: client.chains[0]!, appUserId: uniqueId("au") }).catch((error) => error);
    expect(refusal).toBeInstanceOf(ReceiptsError);
    expect(refusal).toMatchObject({ status: 403, statusWord: "Forbidden" });
    expect(refusal.message).toContain("expired");
    expect(recorder.count(PATHS.login)).toBe(2);
    expect(recorder.count(PATHS.add)).toBe(2);
  });

  it("another 403 is not a token problem: no second login", async () => {
    const client = await issueClient();
    const recorder = workerFetch();
    const pos = clientFor(client, recorder.fetch);
    const refusal = await pos.add(receipt(), { chainId: uniqueId("chain"), appUserId: uniqueId("au") }).catch((error) => error);
    expect(refusal).toMatchObject({ status: 403, statusWord: "Forbidden" });
    expect(refusal.message).toContain("chain_id");
    expect(recorder.count(PATHS.login)).toBe(1);
  });
});

describe("client: add retries safely under one Idempotency-Key", () => {
  it("a lost answer and a 503 are retried, and the Worker stores one receipt", async () => {
    const client = await issueClient();
    const recorder = workerFetch({
      [PATHS.add]: [
        answerLost,
        async () => new Response("upstream busy", { status: 503 }),
      ],
    });
    const pos = clientFor(client, recorder.fetch);
    const added = await pos.add(receipt(), { chainId: client.chains[0]!, appUserId: uniqueId("au") });
    const keys = recorder.calls.filter((call) => call.path === PATHS.add).map((call) => call.headers.get("idempotency-key"));
    expect(keys).toHaveLength(3);
    expect(new Set(keys).size).toBe(1);
    expect(keys[0]).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(await receiptsOf(client.clientId)).toBe(1);
    expect(await receiptExists(added.receipt_id)).toBe(true);
  });

  it("sends the caller's Idempotency-Key, so that a repeated add returns the first receipt", async () => {
    const client = await issueClient();
    const recorder = workerFetch();
    const pos = clientFor(client, recorder.fetch);
    const options = { chainId: client.chains[0]!, appUserId: uniqueId("au"), idempotencyKey: uniqueId("till-7") };
    const first = await pos.add(receipt(), options);
    const again = await pos.add(receipt(), options);
    expect(again).toEqual(first);
    expect(recorder.calls.at(-1)!.headers.get("idempotency-key")).toBe(options.idempotencyKey);
    expect(await receiptsOf(client.clientId)).toBe(1);
  });

  it("docs/api.md#dr-retail addDrRetail sends the version's profile and the till's own bytes, retried under one key", async () => {
    const client = await issueClient();
    const recorder = workerFetch({
      [PATHS.add]: [answerLost],
    });
    const pos = clientFor(client, recorder.fetch);
    const text = JSON.stringify(DR_RETAIL_EXAMPLE, null, 2);
    const added = await pos.addDrRetail(text, { version: "1.0", chainId: client.chains[0]!, appUserId: uniqueId("au") });
    const adds = recorder.calls.filter((call) => call.path === PATHS.add);
    expect(adds.map((call) => call.headers.get("content-type"))).toEqual(Array(2).fill(drRetailContentType("1.0")));
    expect(await receiptsOf(client.clientId)).toBe(1);
    expect(await storedReceipt(added.receipt_id)).toMatchObject({ body: text, format: "dr-retail/v1.0" });
    const again = await pos.addDrRetail(DR_RETAIL_EXAMPLE, { version: "1.1", chainId: client.chains[0]!, appUserId: uniqueId("au") });
    expect(await storedReceipt(again.receipt_id)).toMatchObject({ body: JSON.stringify(DR_RETAIL_EXAMPLE), format: "dr-retail/v1.1" });
  });

  it("gives up after the configured attempts: the last 5xx as a ReceiptsError", async () => {
    const client = await issueClient();
    const unavailable: Step = async () =>
      Response.json({ message: "Unknown error; contact support.", status: "Internal Server Error", status_code: 500 }, { status: 500 });
    const recorder = workerFetch({ [PATHS.add]: Array.from({ length: 5 }, () => unavailable) });
    const pos = clientFor(client, recorder.fetch, { retry: { attempts: 3, delayMs: 0 } });
    const failure = await pos.add(receipt(), { chainId: client.chains[0]!, appUserId: uniqueId("au") }).catch((error) => error);
    expect(failure).toBeInstanceOf(ReceiptsError);
    expect(failure).toMatchObject({ status: 500, statusWord: "Internal Server Error" });
    expect(recorder.count(PATHS.add)).toBe(3);
  });

  it("gives up after the configured attempts: the last network failure as it was", async () => {
    const client = await issueClient();
    const recorder = workerFetch({ [PATHS.add]: Array.from({ length: 5 }, () => networkFailure) });
    const pos = clientFor(client, recorder.fetch, { retry: { attempts: 2, delayMs: 0 } });
    await expect(pos.add(receipt(), { chainId: client.chains[0]!, appUserId: uniqueId("au") })).rejects.toThrow(
      "connection reset",
    );
    expect(recorder.count(PATHS.add)).toBe(2);
  });

  it("does not retry a refusal (4xx): it would only be refused again", async () => {
    const client = await issueClient();
    const recorder = workerFetch();
    const pos = clientFor(client, recorder.fetch);
    const refusal = await pos
      .add({ ...receipt(), currency: "eur" }, { chainId: client.chains[0]!, appUserId: uniqueId("au") })
      .catch((error) => error);
    expect(refusal).toBeInstanceOf(ReceiptsError);
    expect(refusal).toMatchObject({ status: 406, statusWord: "Not Acceptable" });
    expect(refusal.message).toContain("Body field currency");
    expect(recorder.count(PATHS.add)).toBe(1);
  });

  it("delete is not retried: after a lost answer the receipt may be gone already", async () => {
    const client = await issueClient();
    const recorder = workerFetch({ [PATHS.delete]: [networkFailure] });
    const pos = clientFor(client, recorder.fetch);
    await expect(
      pos.delete({ receiptId: crypto.randomUUID(), chainId: client.chains[0]!, appUserId: uniqueId("au") }),
    ).rejects.toThrow("connection reset");
    expect(recorder.count(PATHS.delete)).toBe(1);
  });
});

describe("docs/api.md#limits client: a 429 or 503 that says when is waited out, and sent again under the same key", { timeout: 150_000 }, () => {
  it("an add over the client's limit waits Retry-After against the real Worker and stores the receipt once", async () => {
    const policy = ratePolicy("add", "standard");
    // A fresh client each attempt: one whose spending spilled into the next window cannot spend
    // its whole limit there. The add goes after the attempt, so the attempt starts in a window's
    // first second, leaving the add the rest of it.
    const { client, started } = await withinOneWindow(
      policy,
      async () => {
        const client = await issueClient();
        await spend(policy, client.clientId, policy.quota);
        return { client, started: Date.now() };
      },
      0.9,
    );
    const recorder = workerFetch();
    const pos = clientFor(client, recorder.fetch);
    const options = { chainId: client.chains[0]!, appUserId: uniqueId("au"), idempotencyKey: uniqueId("till") };
    const added = await pos.add(receipt(), options);
    const adds = recorder.calls.filter((call) => call.path === PATHS.add);
    expect(adds.length).toBeGreaterThanOrEqual(2);
    expect(new Set(adds.map((call) => call.headers.get("idempotency-key")))).toEqual(new Set([options.idempotencyKey]));
    expect(Date.now() - started).toBeGreaterThanOrEqual(policy.windowSeconds * 1000 - 1000);
    expect(await receiptsOf(client.clientId)).toBe(1);
    expect(await receiptExists(added.receipt_id)).toBe(true);
  });

  it("a delete told to wait (429, or 503 of an overloaded shard) is sent again; a longer wait than maxWaitSeconds reaches the caller", async () => {
    const client = await issueClient();
    const told = (status: number, seconds: string): Step => async () => Response.json({ message: "wait", status: "x", status_code: status }, { status, headers: { "retry-after": seconds } });
    const recorder = workerFetch({ [PATHS.delete]: [told(429, "1"), told(503, "0")] });
    const pos = clientFor(client, recorder.fetch);
    const started = Date.now();
    const refusal = await pos.delete({ receiptId: crypto.randomUUID(), chainId: client.chains[0]!, appUserId: uniqueId("au") }).catch((error) => error);
    expect(Date.now() - started).toBeGreaterThanOrEqual(1000);
    // The third call reached the Worker: no receipt under that ID.
    expect(refusal).toMatchObject({ status: 406 });
    expect(recorder.count(PATHS.delete)).toBe(3);

    const patient = workerFetch({ [PATHS.add]: [told(429, "120")] });
    const tooLong = await clientFor(client, patient.fetch)
      .add(receipt(), { chainId: client.chains[0]!, appUserId: uniqueId("au") })
      .catch((error) => error);
    expect(tooLong).toMatchObject({ status: 429, retryAfterSeconds: 120 });
    expect(patient.count(PATHS.add)).toBe(1);
  });

  it("waits at most attempts − 1 times, then the 429 reaches the caller", async () => {
    const client = await issueClient();
    const limited: Step = async () => Response.json({ message: "over", status: "Too Many Requests", status_code: 429 }, { status: 429, headers: { "retry-after": "0" } });
    const recorder = workerFetch({ [PATHS.add]: Array.from({ length: 5 }, () => limited) });
    const pos = clientFor(client, recorder.fetch, { retry: { attempts: 3, delayMs: 0 } });
    const refusal = await pos.add(receipt(), { chainId: client.chains[0]!, appUserId: uniqueId("au") }).catch((error) => error);
    expect(refusal).toMatchObject({ status: 429, retryAfterSeconds: 0 });
    expect(recorder.count(PATHS.add)).toBe(3);
    expect(await receiptsOf(client.clientId)).toBe(0);
  });
});

describe("client: ReceiptsError carries the service's answer", () => {
  it("login's 403 keeps its status word Not Acceptable (docs/api.md#login-errors)", async () => {
    const client = await issueClient();
    const pos = clientFor({ ...client, secret: "not-the-secret" }, workerFetch().fetch);
    const refusal = await pos.login().catch((error) => error);
    expect(refusal).toBeInstanceOf(ReceiptsError);
    expect(refusal).toMatchObject({ name: "ReceiptsError", status: 403, statusWord: "Not Acceptable" });
    expect(refusal.message).toContain("client_secret");
    expect(refusal.message).toContain(env.DOCS_URL);
  });

  it("a delete of a receipt that is not there: 406", async () => {
    const client = await issueClient();
    const pos = clientFor(client, workerFetch().fetch);
    const refusal = await pos
      .delete({ receiptId: crypto.randomUUID(), chainId: client.chains[0]!, appUserId: uniqueId("au") })
      .catch((error) => error);
    expect(refusal).toMatchObject({ status: 406, statusWord: "Not Acceptable" });
    expect(refusal.message).toContain("receipt_id");
  });

  it("a 429 tells how long to wait", async () => {
    const client = await issueClient();
    const pos = clientFor({ ...client, secret: "guess" }, workerFetch().fetch);
    let refusal: ReceiptsError | undefined;
    // The local limiter's windows turn with the wall-clock minute: 11 tries reach a 429 even then.
    for (let i = 0; i < 11 && refusal?.status !== 429; i += 1) refusal = await pos.login().catch((error) => error);
    expect(refusal).toMatchObject({ status: 429, statusWord: "Too Many Requests", retryAfterSeconds: 60 });
  });

  it("an answer without an error body, such as a proxy's page, still becomes a ReceiptsError", async () => {
    const client = await issueClient();
    const badGateway: Step = async () => new Response("<html>Bad gateway</html>", { status: 502, statusText: "Bad Gateway" });
    const pos = clientFor(client, workerFetch({ [PATHS.login]: [badGateway] }).fetch, { retry: { attempts: 1 } });
    const failure = await pos.login().catch((error) => error);
    expect(failure).toBeInstanceOf(ReceiptsError);
    expect(failure).toMatchObject({ status: 502, statusWord: "Bad Gateway", message: "The service answered 502 without an error body." });
  });
});

describe("client: options are checked when it is made", () => {
  const valid: ReceiptsClientOptions = { baseUrl: BASE, clientId: "pos-1", clientSecret: "s3cret" };
  it.each([
    ["a baseUrl that is no URL", { baseUrl: "receipts.example.com" }, /baseUrl/],
    ["a baseUrl with a query", { baseUrl: `${BASE}/?x=1` }, /baseUrl/],
    ["a baseUrl of another scheme", { baseUrl: "ftp://receipts.example.com" }, /baseUrl/],
    ["an empty clientId", { clientId: "" }, /clientId/],
    ["a clientSecret with a line break", { clientSecret: "s3cret\n" }, /clientSecret/],
    ["zero attempts", { retry: { attempts: 0 } }, /retry\.attempts/],
  ])("refuses %s", (_label, change, reason) => {
    expect(() => new ReceiptsClient({ ...valid, ...change })).toThrow(TypeError);
    expect(() => new ReceiptsClient({ ...valid, ...change })).toThrow(reason);
  });

  it("takes a baseUrl with a trailing slash", async () => {
    const client = await issueClient();
    const recorder = workerFetch();
    await clientFor(client, recorder.fetch, { baseUrl: `${BASE}/` }).login();
    expect(recorder.calls[0]!.path).toBe(PATHS.login);
  });
});
