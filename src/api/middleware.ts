/**
 * The checks a route of the table (src/api/route-table.ts) runs before its handler, each a Hono
 * middleware chained per route in the order docs/api.md fixes: its headers, then its token and
 * client, then its limit. A handler finds what they read in `c.var.headers` and `c.var.client`.
 */
import { createMiddleware } from "hono/factory";
import { authenticateClient } from "./auth/bearer.ts";
import type { ApiBindings } from "./context.ts";
import { readHeaders } from "./headers.ts";
import { countAgainstLimit } from "./rate-limit.ts";
import type { Route, RouteScope } from "./route-table.ts";

/** The middleware of a route's entry, in the order they run. */
export function routeChecks(route: Route) {
  return [
    ...(route.headers ? [checkHeaders(route.headers, route.malformedIs400)] : []),
    ...(route.scope ? [authenticate(route.scope)] : []),
    ...(route.limit ? [countAgainstLimit(route.limit)] : []),
  ];
}

// The request log names the caller once its headers are read, whatever is refused after.
function checkHeaders(schema: NonNullable<Route["headers"]>, malformedIs400: readonly string[] = []) {
  return createMiddleware<ApiBindings>(async (c, next) => {
    const headers = readHeaders(c.req.raw, schema, { malformedIs400 });
    c.set("headers", headers);
    if (typeof headers.client_id === "string") c.set("clientId", headers.client_id);
    await next();
  });
}

function authenticate(scope: RouteScope) {
  return createMiddleware<ApiBindings>(async (c, next) => {
    const headers = c.var.headers as { Authorization: string; client_id: string };
    c.set("client", await authenticateClient(c, { authorization: headers.Authorization, client_id: headers.client_id }, scope));
    await next();
  });
}
