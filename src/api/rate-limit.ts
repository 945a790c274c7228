/**
 * Limits per client on add, delete and the event feed (docs/api.md#rate-limits): each
 * authenticated request counts once against its client's tier on the route's Rate Limiting
 * binding, and every answer of these routes names the policy in the IETF draft's fields.
 */
import { ratePolicy, type LimitedRoute } from "../shared/rate-limits.ts";
import { createMiddleware } from "hono/factory";
import type { ApiBindings, ApiContext } from "./context.ts";
import { rateLimited, refuse } from "./refusals.ts";

/**
 * Middleware of a limited route: every answer, success or refusal, carries `RateLimit-Policy`
 * and `RateLimit` (draft-ietf-httpapi-ratelimit-headers). The binding tells neither the count
 * left nor the window's end: `r` is 0 on the 429 and 1 otherwise ("not over the limit"), and
 * `t` the whole window. An answer given before the client was known names the standard policy.
 */
export function rateLimitFields(route: LimitedRoute) {
  return async (c: ApiContext, next: () => Promise<void>): Promise<void> => {
    await next();
    const policy = c.get("ratePolicy") ?? ratePolicy(route, "standard");
    const remaining = c.get("rateLimited") ? 0 : 1;
    c.res.headers.set("ratelimit-policy", `"${policy.name}";q=${policy.quota};w=${policy.windowSeconds}`);
    c.res.headers.set("ratelimit", `"${policy.name}";r=${remaining};t=${policy.windowSeconds}`);
  };
}

/**
 * Middleware that counts this request against the client's limit on the route; over it, a 429
 * naming the limit. Chained once the token and the client are checked (src/api/middleware.ts),
 * so that nobody spends another client's budget, and before the handler's storage calls, so that
 * a flood costs the shards nothing.
 */
export function countAgainstLimit(route: LimitedRoute) {
  return createMiddleware<ApiBindings>(async (c, next) => {
    const client = c.var.client!;
    const policy = ratePolicy(route, client.rate_tier ?? "standard");
    c.set("ratePolicy", policy);
    const { success } = await c.env[policy.binding].limit({ key: client.client_id });
    if (!success) {
      c.set("rateLimited", true);
      throw refuse(rateLimited(policy, route), `over ${policy.name}`);
    }
    await next();
  });
}
