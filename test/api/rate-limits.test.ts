/**
 * Limits per client on add, delete and the event feed (docs/api.md#rate-limits):
 * the real Rate Limiting bindings of wrangler.jsonc, which Miniflare counts in a Durable Object
 * per binding in windows aligned to the clock. A test spends most of a client's window through
 * the binding itself (the same counter the Worker's calls count on), then sends the requests
 * at the bound and past it.
 */
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { ratePolicy, type LimitedRoute, type RatePolicy } from "../../src/shared/rate-limits.ts";
import { PATHS } from "../../src/shared/paths.ts";
import { APP_SCOPE } from "../../src/shared/types.ts";
import {
  call,
  expectErrorShape,
  issueClient,
  loggedRequests,
  loginHeadersFor,
  newCaller,
  postAdd,
  uniqueId,
  updateClient,
  validReceiptBody,
  type Answer,
} from "../support/api.ts";
import { deleteHeadersFor, seedReceipt } from "../support/notices.ts";
import { nextWindow, spend, withinOneWindow } from "../support/rate-limits.ts";
import { receiptsOf } from "../support/shards.ts";

/** The feed's caller: an app push service's client, logged in. */
async function feedHeaders(): Promise<Record<string, string>> {
  const client = await issueClient({ chains: [], scopes: [APP_SCOPE], clientId: uniqueId("app") });
  const login = await call(PATHS.login, { headers: { ...loginHeadersFor(client), scope: APP_SCOPE } });
  return { Authorization: `Bearer ${login.body.data.access_token}`, client_id: client.clientId };
}

function expectFields(answer: Answer, policy: RatePolicy, remaining: 0 | 1): void {
  expect(answer.headers.get("ratelimit-policy")).toBe(`"${policy.name}";q=${policy.quota};w=${policy.windowSeconds}`);
  expect(answer.headers.get("ratelimit")).toBe(`"${policy.name}";r=${remaining};t=${policy.windowSeconds}`);
}

function expectLimited(answer: Answer, policy: RatePolicy, words: string): void {
  const message = expectErrorShape(answer, 429, "Too Many Requests");
  expect(message).toContain(`Too many ${words} requests for header client_id: the limit is ${policy.quota} per ${policy.windowSeconds} s (policy ${policy.name})`);
  expect(answer.headers.get("retry-after")).toBe(String(policy.windowSeconds));
  expectFields(answer, policy, 0);
}

// A test may wait out most of a window (10 s) before it starts, try again in the next, and one
// waits for the window after.
describe("docs/api.md#rate-limits limits per client", { timeout: 150_000 }, () => {
  const addPolicy = ratePolicy("add", "standard");

  it("add: the last request within the limit is stored, the next one is 429 naming the limit and stores nothing", async () => {
    const { caller, last, over } = await withinOneWindow(addPolicy, async () => {
      const caller = await newCaller();
      await spend(addPolicy, caller.client.clientId, addPolicy.quota - 1);
      return { caller, last: await postAdd(caller.headers), over: await postAdd(caller.headers) };
    });
    expect(last.status).toBe(200);
    expectFields(last, addPolicy, 1);
    expectLimited(over, addPolicy, "add");
    expect(await receiptsOf(caller.client.clientId)).toBe(1);
  });

  it("delete: 429 past the limit, and the receipt stays", async () => {
    const policy = ratePolicy("delete", "standard");
    const { caller, over } = await withinOneWindow(policy, async () => {
      const caller = await newCaller();
      const receipt = await seedReceipt(caller.client);
      await spend(policy, caller.client.clientId, policy.quota);
      return { caller, over: await call(PATHS.delete, { headers: deleteHeadersFor(caller.token, receipt) }) };
    });
    expectLimited(over, policy, "delete");
    expect(await receiptsOf(caller.client.clientId)).toBe(1);
  });

  it("the event feed: the last page within the limit is served, the next request is 429", async () => {
    const policy = ratePolicy("events", "standard");
    const { last, over } = await withinOneWindow(policy, async () => {
      const headers = await feedHeaders();
      await spend(policy, headers.client_id!, policy.quota - 1);
      const page = () => call(`${PATHS.events}?limit=1`, { method: "GET", headers });
      return { last: await page(), over: await page() };
    });
    expect(last.status).toBe(200);
    expectFields(last, policy, 1);
    expectLimited(over, policy, "event feed");
  });

  it("one client over its limit leaves another client's requests alone", async () => {
    const other = await newCaller();
    const flooded = await withinOneWindow(addPolicy, async () => {
      const flooding = await newCaller();
      await spend(addPolicy, flooding.client.clientId, addPolicy.quota);
      return postAdd(flooding.headers);
    });
    expect(flooded.status).toBe(429);
    expect((await postAdd(other.headers)).status).toBe(200);
  });

  // That tier's bound is its binding's in wrangler.jsonc, which test/docs/rate-limit-config.test.ts
  // holds equal to src/shared/rate-limits.ts; spending 6,000 here would outlast a window.
  it("a client the operator gave a higher tier is counted against that tier's limit, and its answers name it", async () => {
    const answer = await withinOneWindow(addPolicy, async () => {
      const caller = await newCaller();
      await updateClient(caller.client.clientId, { rate_tier: "large" });
      await spend(addPolicy, caller.client.clientId, addPolicy.quota);
      return postAdd(caller.headers);
    });
    expect(answer.status).toBe(200);
    expectFields(answer, ratePolicy("add", "large"), 1);
  });

  it("a refusal before the client is known names the standard policy and spends nothing", async () => {
    const { refusals, last } = await withinOneWindow(addPolicy, async () => {
      const caller = await newCaller();
      await spend(addPolicy, caller.client.clientId, addPolicy.quota - 1);
      const { chain_id: _chain, ...missingChain } = caller.headers;
      const refusals: Answer[] = [];
      for (let i = 0; i < 3; i += 1) {
        refusals.push(await postAdd(missingChain), await postAdd({ ...caller.headers, Authorization: "Bearer not.a.token" }));
      }
      return { refusals, last: await postAdd(caller.headers) };
    });
    expect(refusals.map((answer) => answer.status)).toEqual([400, 403, 400, 403, 400, 403]);
    for (const answer of refusals) expectFields(answer, addPolicy, 1);
    expect(last.status).toBe(200);
  });

  it("every answer of a limited route carries both fields, the 405 and the 200 among them", async () => {
    const routes: [LimitedRoute, string, string][] = [["add", PATHS.add, "GET"], ["delete", PATHS.delete, "GET"], ["events", PATHS.events, "POST"]];
    for (const [route, path, wrongMethod] of routes) {
      expectFields(await call(path, { method: wrongMethod }), ratePolicy(route, "standard"), 1);
    }
    expectFields(await postAdd((await newCaller()).headers), addPolicy, 1);
    expect((await call(PATHS.login, { headers: {} })).headers.get("ratelimit")).toBeNull();
  });

  it("a keyed retry of an add that went through, sent over the limit, gets 429; after the window, the first answer and no second receipt", async () => {
    const body = validReceiptBody();
    const { caller, headers, first, over } = await withinOneWindow(addPolicy, async () => {
      const caller = await newCaller();
      const headers = { ...caller.headers, "Idempotency-Key": uniqueId("key") };
      const first = await postAdd(headers, body);
      await spend(addPolicy, caller.client.clientId, addPolicy.quota - 1);
      return { caller, headers, first, over: await postAdd(headers, body) };
    });
    expect(first.status).toBe(200);
    expectLimited(over, addPolicy, "add");
    // The next window, not merely a fresh one: on a busy machine the spending can spill into the
    // window that has just begun.
    await nextWindow(addPolicy);
    const replay = await postAdd(headers, body);
    expect(replay.body).toEqual(first.body);
    expect(await receiptsOf(caller.client.clientId)).toBe(1);
  });

  it("the request log line of a 429 names the policy it was over", async () => {
    const { caller, lines } = await withinOneWindow(addPolicy, async () => {
      const caller = await newCaller();
      await spend(addPolicy, caller.client.clientId, addPolicy.quota);
      return { caller, lines: await loggedRequests(() => postAdd(caller.headers)) };
    });
    expect(lines[0]).toMatchObject({ status: 429, client_id: caller.client.clientId, outcome: "refused", cause: `over ${addPolicy.name}` });
  });
});
