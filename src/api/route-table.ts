/**
 * The routes of receipts.v2 (docs/api.md#operations), one entry each: its method, its path, the
 * headers it reads, the scope its token must have and the limit it counts against. The Worker
 * (src/api/app.ts) registers each with its handler, its 405 and its rate-limit fields from here;
 * the OpenAPI document (src/api/openapi/document.ts) reads each operation's method, security and
 * rate-limit fields from here. Data only, so that the generator runs in Node without the Worker.
 */
import type * as z from "zod/mini";
import { PATHS } from "../shared/paths.ts";
import type { LimitedRoute } from "../shared/rate-limits.ts";
import { addHeaders, appUserJobHeaders, deleteHeaders, feedHeaders, jobHeaders, loginHeaders, statusHeaders } from "../shared/schemas.ts";
import { APP_SCOPE, OPS_SCOPE, POS_SCOPE } from "../shared/types.ts";

/** The scopes a route may require of its Bearer token. */
export type RouteScope = typeof POS_SCOPE | typeof APP_SCOPE | typeof OPS_SCOPE;

/** One route of the table. */
export interface Route {
  /** GET routes answer HEAD too (Hono answers it with the GET handler). */
  method: "GET" | "POST";
  path: string;
  /** The headers read first, before anything else (docs/api.md#common-rules); none for the public GETs. */
  headers?: z.ZodMiniObject<Record<string, z.ZodMiniType>>;
  /** Headers whose malformed value is a 400 rather than a 406 on this route (docs/api.md#jobs). */
  malformedIs400?: readonly string[];
  /** The scope of the Bearer token the route takes; a route without one takes no token. */
  scope?: RouteScope;
  /** The limit per client the route counts against once its client is known (docs/api.md#rate-limits). */
  limit?: LimitedRoute;
}

/** Every route the Worker answers, by the name PATHS gives its path. */
export const ROUTES = {
  login: { method: "POST", path: PATHS.login, headers: loginHeaders },
  add: { method: "POST", path: PATHS.add, headers: addHeaders, scope: POS_SCOPE, limit: "add" },
  delete: { method: "POST", path: PATHS.delete, headers: deleteHeaders, scope: POS_SCOPE, limit: "delete" },
  exportAppUser: { method: "POST", path: PATHS.exportAppUser, headers: appUserJobHeaders, malformedIs400: ["app_user_id"], scope: APP_SCOPE, limit: "jobs" },
  eraseAppUser: { method: "POST", path: PATHS.eraseAppUser, headers: appUserJobHeaders, malformedIs400: ["app_user_id"], scope: APP_SCOPE, limit: "jobs" },
  openapi: { method: "GET", path: PATHS.openapi },
  docs: { method: "GET", path: PATHS.docs },
  events: { method: "GET", path: PATHS.events, headers: feedHeaders, scope: APP_SCOPE, limit: "events" },
  status: { method: "GET", path: PATHS.status, headers: statusHeaders, scope: OPS_SCOPE },
  job: { method: "GET", path: PATHS.job, headers: jobHeaders, scope: APP_SCOPE, limit: "jobs" },
  jobExport: { method: "GET", path: PATHS.jobExport, headers: jobHeaders, scope: APP_SCOPE, limit: "jobs" },
} as const satisfies Record<keyof typeof PATHS, Route>;

/** A route's name in the table. */
export type RouteName = keyof typeof ROUTES;

/** The route at `path` (a path as PATHS writes it). Throws for a path the table lacks. */
export function routeAt(path: string): Route {
  const route = Object.values(ROUTES).find((candidate) => candidate.path === path);
  if (!route) throw new Error(`${path} is not in the route table`);
  return route;
}

/** The methods a route's 405 names in Allow: a GET's HEAD as well. */
export function allowedMethods(route: Route): string {
  return route.method === "GET" ? "GET, HEAD" : route.method;
}
