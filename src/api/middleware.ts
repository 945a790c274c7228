/**
 * The checks a route of the table (src/api/route-table.ts) runs before its handler, each a Hono
 * middleware chained per route in the order docs/api.md fixes: its headers, then its token and
 * client, then its limit. A handler finds what they read in `c.var.headers` and `c.var.client`.
 */
import { createMiddleware } from "hono/factory";
import type * as z from "zod/mini";
import type { ClientRecord } from "../shared/types.ts";
import { authenticateClient } from "./auth/bearer.ts";
import type { ApiBindings, ApiContext } from "./context.ts";
import { readHeaders } from "./headers.ts";
import { countAgainstLimit } from "./rate-limit.ts";
import type { Route, RouteName, RouteScope, ROUTES } from "./route-table.ts";

type HeadersOf<R> = R extends { headers: infer Schema extends z.ZodMiniType } ? z.output<Schema> : undefined;
type ClientOf<R> = R extends { scope: RouteScope } ? { client: ClientRecord } : unknown;

/** The context a route's handler gets: its headers read, and its client once it takes a token. */
export type RouteContext<Name extends RouteName> = ApiContext & {
  readonly var: Readonly<{ headers: HeadersOf<(typeof ROUTES)[Name]> } & ClientOf<(typeof ROUTES)[Name]>>;
};

/** A route's handler, run once every check of its entry has passed. */
export type RouteHandler<Name extends RouteName> = (c: RouteContext<Name>) => Response | Promise<Response>;

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
