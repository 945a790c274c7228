/** src/notifier/push.ts: one push's deadline, and what a push leaves behind in the runtime. */
import { afterEach, describe, expect, it, vi } from "vitest";
import { pushNotice } from "../../src/notifier/push.ts";

const key = await crypto.subtle.importKey("raw", new Uint8Array(32), { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
const target = { url: "https://push.example.test/receipts", keys: [key] };

afterEach(() => {
  vi.unstubAllGlobals();
});

describe("docs/api.md#receipt-events a push and its timeout (PUSH_TIMEOUT_SECONDS)", () => {
  it("a push service that does not answer in time: the push is given up as a network failure, to retry", async () => {
    vi.stubGlobal(
      "fetch",
      vi.fn((_url: string, init: RequestInit) => new Promise((_resolve, reject) => init.signal!.addEventListener("abort", () => reject(init.signal!.reason)))),
    );
    expect(await pushNotice(target, "event-slow", "{}", new Date(), 50)).toEqual({
      ok: false,
      retryable: true,
      error: expect.stringMatching(/^network: TimeoutError: /),
    });
  });

  it("pushes answered at once leave no timer running: more of them than the runtime's 10,000 active timers, and a timer still starts after", async () => {
    vi.stubGlobal("fetch", vi.fn(async () => new Response(null, { status: 204 })));
    let delivered = 0;
    for (let index = 0; index < 10_001; index += 1) {
      if ((await pushNotice(target, `event-${index}`, "{}", new Date(), 10_000)).ok) delivered += 1;
    }
    expect(delivered).toBe(10_001);
    // A runtime past its limit of active timers refuses this one (QuotaExceededError).
    await new Promise((resolve) => setTimeout(resolve, 1));
  });
});
