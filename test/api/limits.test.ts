/**
 * What bounds a request's time, headers and body, and the headers every response carries
 * (docs/api.md "Limits and hardening").
 */
import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it, vi } from "vitest";
import { createApp } from "../../src/api/app.ts";
import { apiConfig } from "../../src/shared/config.ts";
import {
  call,
  callInContext,
  expectErrorShape,
  expectRefused,
  issueClient,
  loggedRequests,
  loginHeadersFor,
  newCaller,
  postAdd,
  uniqueId,
  validReceiptBody,
  type Answer,
} from "../support/api.ts";
import { deleteHeadersFor, seedReceipt } from "../support/notices.ts";
import { PATHS } from "../../src/shared/paths.ts";
import { drRetailContentType } from "../../src/shared/dr-retail-profiles.ts";
import { drTestReceipts } from "../support/dr-retail.ts";

// The test run's BODY_DEADLINE_SECONDS (vitest.config.ts), shorter than the deployed 10 s so that
// the real-time test below waits out less.
const BODY_DEADLINE_MS = apiConfig(env).bodyDeadlineMs;

/** A request body that sends `prefix`, then one byte each `everyMs` (or nothing more), and never ends. */
function endlessBody(prefix: string, everyMs?: number): ReadableStream<Uint8Array> {
  let sentPrefix = false;
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      if (!sentPrefix) {
        sentPrefix = true;
        controller.enqueue(new TextEncoder().encode(prefix));
        return;
      }
      if (everyMs === undefined) return new Promise<void>(() => undefined);
      await new Promise((resolve) => setTimeout(resolve, everyMs));
      controller.enqueue(new TextEncoder().encode(" "));
    },
  });
}

describe("request limits: a body must arrive within the deadline", () => {
  // Only the timers are faked, so tokens and created_at still read the real clock.
  afterEach(() => void vi.useRealTimers());

  it.each([
    ["a body that stops half way and never ends", undefined],
    ["a body that trickles in one byte a second, forever", 1000],
  ])("%s: 400 naming the body at the deadline and not before, nothing stored", async (_label, everyMs) => {
    const { headers } = await newCaller();
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout"] });
    const body = endlessBody(JSON.stringify(validReceiptBody()).slice(0, 100), everyMs);
    let answered = false;
    let message = "";
    const lines = await loggedRequests(async () => {
      message = await expectRefused(
        async () => {
          const pending = callInContext(PATHS.add, { headers, body }).finally(() => (answered = true));
          await vi.advanceTimersByTimeAsync(BODY_DEADLINE_MS - 1);
          expect(answered).toBe(false);
          await vi.advanceTimersByTimeAsync(1);
          return pending;
        },
        400,
        "Bad Request",
      );
    });
    expect(message).toContain(`Body did not arrive in full within ${BODY_DEADLINE_MS / 1000} s`);
    expect(lines.find((line) => line.event === "request")).toMatchObject({ status: 400, cause: "body deadline" });
  });

  it("a body that takes most of the deadline still counts", async () => {
    const { headers } = await newCaller();
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout"] });
    const text = JSON.stringify(validReceiptBody());
    const half = text.length >> 1;
    let step = 0;
    const body = new ReadableStream<Uint8Array>({
      async pull(controller) {
        step += 1;
        if (step === 1) return controller.enqueue(new TextEncoder().encode(text.slice(0, half)));
        await new Promise((resolve) => setTimeout(resolve, BODY_DEADLINE_MS - 100));
        controller.enqueue(new TextEncoder().encode(text.slice(half)));
        controller.close();
      },
    });
    const pending = callInContext(PATHS.add, { headers, body });
    await vi.advanceTimersByTimeAsync(BODY_DEADLINE_MS - 100);
    expect((await pending).status).toBe(200);
  });

  it(
    "holds through the runtime too, in real time: a body that never ends is cut at the deadline",
    async () => {
      const { headers } = await newCaller();
      const started = Date.now();
      await expectRefused(() => call(PATHS.add, { headers, body: endlessBody("{") }), 400, "Bad Request");
      expect(Date.now() - started).toBeGreaterThanOrEqual(BODY_DEADLINE_MS);
      expect(Date.now() - started).toBeLessThan(BODY_DEADLINE_MS + 5000);
    },
    BODY_DEADLINE_MS + 10_000,
  );

  it("routes that read no body answer at once, however long the body takes", async () => {
    const client = await issueClient();
    const answer = await call(PATHS.login, { headers: loginHeadersFor(client), body: endlessBody("{") });
    expect(answer.status).toBe(200);
  });

  it("a refusal before the body does not wait for it", async () => {
    const { headers } = await newCaller();
    const answer = await call(PATHS.add, { headers: { ...headers, chain_id: uniqueId("chain") }, body: endlessBody("{") });
    expectErrorShape(answer, 403, "Forbidden");
  });
});

describe("request limits: headers beyond the ones a route reads cost nothing", () => {
  // The runtime in front of the Worker bounds the head (docs/api.md); the Worker itself reads only
  // its own headers by name, so however many others arrive, the answer is the same.
  it("1,000 other headers: the add is answered as without them", async () => {
    const { headers } = await newCaller();
    const extra = Object.fromEntries(Array.from({ length: 1000 }, (_, i) => [`x-extra-${i}`, "v"]));
    expect((await postAdd({ ...extra, ...headers })).status).toBe(200);
  });

  it("one other header of 256 KiB: the add is answered as without it", async () => {
    const { headers } = await newCaller();
    expect((await postAdd({ "x-padding": "p".repeat(256 * 1024), ...headers })).status).toBe(200);
  });

  it("an Authorization of 256 KiB: 403, as any token that is not valid", async () => {
    const { headers } = await newCaller();
    await expectRefused(() => postAdd({ ...headers, Authorization: `Bearer ${"t".repeat(256 * 1024)}` }), 403, "Forbidden");
  });
});

describe("request limits: a body of 64 KiB cannot be made costly", () => {
  const deep = (depth: number, open: string, close: string, inner = "1") => open.repeat(depth) + inner + close.repeat(depth);
  it.each<[string, string, number, string]>([
    ["32,767 nested arrays as the body", deep(32_767, "[", "]"), 406, "Not Acceptable"],
    ["10,000 nested objects as the body", deep(10_000, '{"a":', "}"), 406, "Not Acceptable"],
    ["nesting beyond 64 KiB", deep(40_000, "[", "]"), 413, "Payload Too Large"],
  ])("%s: answered, nothing stored", async (_label, text, status, word) => {
    const { headers } = await newCaller();
    await expectRefused(() => postAdd(headers, text), status, word);
  });

  it("a line item holding 10,000 levels of nesting in a field of its own: 406 naming where it passes 64 levels", async () => {
    const { headers } = await newCaller();
    const body = JSON.stringify(validReceiptBody()).replace('"sku":', `"x_nested":${deep(10_000, "[", "]")},"sku":`);
    const message = await expectRefused(() => postAdd(headers, body), 406, "Not Acceptable");
    expect(message).toContain("Body field line_items[0].x_nested[0][0]");
  });

  it("a line_items list of 8,000 numbers: 406 naming at most ten of them", async () => {
    const { headers } = await newCaller();
    const message = await expectRefused(() => postAdd(headers, { ...validReceiptBody(), line_items: Array(8000).fill(1) }), 406, "Not Acceptable");
    expect(message).toContain("line_items");
    expect(message.length).toBeLessThan(2000);
  });
});

describe("request limits: arrays and objects nest at most 64 deep, in either shape", () => {
  // The body's own object is the first level; a field of a line item's own starts at the fourth,
  // one of DR's customer at the third. A run of 16 digits sends a DR body down the exact-number
  // parse, which recursed once per level.
  const nested = (levels: number, inner: string) => "[".repeat(levels) + inner + "]".repeat(levels);
  const ours = (levels: number, inner: string) =>
    JSON.stringify(validReceiptBody()).replace('"sku":', `"x_nested":${nested(levels - 3, inner)},"sku":`);
  const dr = (levels: number, inner: string) => JSON.stringify(drReceipt.body).replace(/}$/, `,"customer":{"x":${nested(levels - 2, inner)}}}`);
  const drReceipt = drTestReceipts().find(({ name }) => name.startsWith("VAT at 25"))!;
  const shapes = [
    ["our shape", ours, {}, "line_items[0].x_nested[0]"],
    ["DR Retail", dr, { "Content-Type": drRetailContentType(drReceipt.version) }, "customer.x[0]"],
  ] as const;
  const inners = [
    ["", "1"],
    [" and a run of 16 digits", '"1111222233334444"'],
  ] as const;

  describe.each(shapes)("%s", (_shape, body, contentType, path) => {
    it.each(inners)("64 levels%s: accepted", async (_digits, inner) => {
      const { headers } = await newCaller();
      const text = body(64, inner);
      expect((await postAdd({ ...headers, ...contentType }, text)).status).toBe(200);
    });

    it.each(inners)("65 levels%s: 406 naming where the 65th opens, nothing stored", async (_digits, inner) => {
      const { headers } = await newCaller();
      const message = await expectRefused(() => postAdd({ ...headers, ...contentType }, body(65, inner)), 406, "Not Acceptable");
      expect(message).toContain(`Body field ${path}`);
      expect(message).toContain("nests arrays and objects more than 64 deep");
    });

    it.each(inners)("5,000 levels%s: 406, never a 500", async (_digits, inner) => {
      const { headers } = await newCaller();
      await expectRefused(() => postAdd({ ...headers, ...contentType }, body(5000, inner)), 406, "Not Acceptable");
    });
  });
});

describe("security headers: every answer is JSON, never cached, never sniffed", () => {
  const cases: [string, () => Promise<Answer>, number][] = [
    ["login 200", async () => call(PATHS.login, { headers: loginHeadersFor(await issueClient()) }), 200],
    ["login 400", async () => call(PATHS.login), 400],
    ["login 403", async () => call(PATHS.login, { headers: { ...loginHeadersFor(await issueClient()), client_secret: "wrong" } }), 403],
    ["login 406", async () => call(PATHS.login, { headers: { ...loginHeadersFor(await issueClient()), scope: "" } }), 406],
    ["add 200", async () => postAdd((await newCaller()).headers), 200],
    ["add 403", async () => postAdd({ ...(await newCaller()).headers, Authorization: "Bearer x" }), 403],
    ["add 406", async () => postAdd((await newCaller()).headers, "{"), 406],
    ["add 409", async () => {
      const keyed = { ...(await newCaller()).headers, "Idempotency-Key": uniqueId("key") };
      await postAdd(keyed);
      return postAdd(keyed, { ...validReceiptBody(), store_id: "other" });
    }, 409],
    ["add 413", async () => postAdd((await newCaller()).headers, " ".repeat(70_000)), 413],
    ["add 415", async () => postAdd({ ...(await newCaller()).headers, "Content-Type": "text/plain" }), 415],
    ["delete 200", async () => {
      const { client, headers } = await newCaller();
      return call(PATHS.delete, { headers: deleteHeadersFor(headers.Authorization!.slice(7), await seedReceipt(client)) });
    }, 200],
    ["delete 400", async () => call(PATHS.delete), 400],
    ["delete 403", async () => {
      const { client } = await newCaller();
      return call(PATHS.delete, { headers: deleteHeadersFor("forged", await seedReceipt(client)) });
    }, 403],
    ["delete 406", async () => {
      const { client, headers } = await newCaller();
      return call(PATHS.delete, { headers: { ...deleteHeadersFor(headers.Authorization!.slice(7), await seedReceipt(client)), app_user_id: "someone-else" } });
    }, 406],
    ["405", async () => call(PATHS.add, { method: "GET" }), 405],
    ["404", async () => call("/receipts/v2/nothing"), 404],
  ];
  it.each(cases)("%s", async (_label, send, status) => {
    const answer = await send();
    expect(answer.status).toBe(status);
    expect(answer.headers.get("content-type")).toBe("application/json; charset=utf-8");
    expect(answer.headers.get("cache-control")).toBe("no-store");
    expect(answer.headers.get("x-content-type-options")).toBe("nosniff");
  });

  it("a route that builds its own Response, of any type, still leaves never sniffed and never cached, unless it chose a cache", async () => {
    const app = createApp();
    app.get("/receipts/v2/own-response", () => new Response("<b>text a till wrote</b>", { headers: { "content-type": "text/plain" } }));
    app.get("/receipts/v2/own-cache", () => new Response("{}", { headers: { "cache-control": "public, max-age=60" } }));
    const own = await app.request("/receipts/v2/own-response", {}, env);
    expect(await own.text()).toBe("<b>text a till wrote</b>");
    expect(own.headers.get("x-content-type-options")).toBe("nosniff");
    expect(own.headers.get("cache-control")).toBe("no-store");
    const cached = await app.request("/receipts/v2/own-cache", {}, env);
    await cached.text();
    expect(cached.headers.get("x-content-type-options")).toBe("nosniff");
    expect(cached.headers.get("cache-control")).toBe("public, max-age=60");
  });
});
