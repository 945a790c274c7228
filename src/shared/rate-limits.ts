/**
 * The limits per client on add, delete, the event feed and the app-user jobs (docs/api.md#rate-limits): one Workers
 * Rate Limiting binding per route and tier, keyed by client_id. A binding's limit is fixed in
 * wrangler.jsonc and the binding does not tell it, so the numbers are written here too, for the
 * answers' RateLimit-Policy field and the 429's message; test/api/rate-limits.test.ts holds the
 * two equal. Sizes are derived in docs/scale.md §12.
 */

/** The tiers an operator grants with `npm run clients -- tier`; a record without one is `standard`. */
export const RATE_TIERS = ["standard", "large", "xlarge"] as const;
export type RateTier = (typeof RATE_TIERS)[number];

/** The routes limited per client; `jobs` counts the app-user jobs' routes together (docs/api.md#jobs). */
export const LIMITED_ROUTES = ["add", "delete", "events", "jobs"] as const;
export type LimitedRoute = (typeof LIMITED_ROUTES)[number];

/** One route's limit in one tier. */
export interface RatePolicy {
  /** The policy's name in RateLimit-Policy and RateLimit: `<route>.<tier>`. */
  name: string;
  /** The Rate Limiting binding that counts it. */
  binding: `${Uppercase<LimitedRoute>}_LIMIT_${Uppercase<RateTier>}`;
  /** Requests let through per window. */
  quota: number;
  /** The window in seconds (the binding's period: 10 or 60). */
  windowSeconds: 10 | 60;
}

/** Requests per 10 s of each route in the standard tier; `large` is 5 times, `xlarge` 10 times. */
const STANDARD_QUOTAS: Record<LimitedRoute, number> = { add: 1200, delete: 300, events: 100, jobs: 100 };
const TIER_FACTORS: Record<RateTier, number> = { standard: 1, large: 5, xlarge: 10 };

/** The policy of a route in a tier. */
export function ratePolicy(route: LimitedRoute, tier: RateTier): RatePolicy {
  return {
    name: `${route}.${tier}`,
    binding: `${route.toUpperCase() as Uppercase<LimitedRoute>}_LIMIT_${tier.toUpperCase() as Uppercase<RateTier>}`,
    quota: STANDARD_QUOTAS[route] * TIER_FACTORS[tier],
    windowSeconds: 10,
  };
}

/** Whether `text` names a tier. */
export function isRateTier(text: string): text is RateTier {
  return (RATE_TIERS as readonly string[]).includes(text);
}
