/**
 * The limits per client exist twice: as Rate Limiting bindings in wrangler.jsonc, which count, and
 * in src/shared/rate-limits.ts, which the answers' RateLimit-Policy and 429 message name. They
 * must say the same (docs/api.md#rate-limits).
 */
import path from "node:path";
import { describe, expect, it } from "vitest";
import { unstable_getMiniflareWorkerOptions } from "wrangler";
import { LIMITED_ROUTES, RATE_TIERS, ratePolicy } from "../../src/shared/rate-limits.ts";

const root = path.join(import.meta.dirname, "../..");
const ROUTES = LIMITED_ROUTES;

describe("docs/api.md#limits the limits the answers name are the bindings' own", () => {
  const ratelimits = unstable_getMiniflareWorkerOptions(path.join(root, "wrangler.jsonc")).workerOptions.ratelimits as Record<
    string,
    { simple: { limit: number; period: number } }
  >;

  it.each(ROUTES.flatMap((route) => RATE_TIERS.map((tier) => [route, tier] as const)))("%s in tier %s", (route, tier) => {
    const policy = ratePolicy(route, tier);
    expect(ratelimits[policy.binding]?.simple).toEqual({ limit: policy.quota, period: policy.windowSeconds });
  });

  it("wrangler.jsonc has no limit binding the table does not name, besides the failed-login limit", () => {
    const named = ROUTES.flatMap((route) => RATE_TIERS.map((tier) => ratePolicy(route, tier).binding));
    expect(Object.keys(ratelimits).sort()).toEqual([...named, "LOGIN_LIMITER"].sort());
  });
});
