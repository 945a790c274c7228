/**
 * The API Worker's HTTP surface: the routes, the request log, and the error model that every
 * refusal goes through (docs/api.md#common-rules).
 */
import { Hono } from "hono";
import { matchedRoutes } from "hono/route";
import { describeError, logLine } from "../shared/log.ts";
import { writeMetric, type MetricPoint } from "../shared/metrics.ts";
import { identifyingText } from "../shared/schemas.ts";
import { PATHS } from "../shared/paths.ts";
import { apiConfig } from "../shared/config.ts";
import { newIsolateState, type ApiBindings, type ApiContext, type IsolateState } from "./context.ts";
import { ApiError, UNCONFIGURED_SUPPORT, errorBody, internalErrorBody, type SupportPointer } from "./errors.ts";
import { routeChecks } from "./middleware.ts";
import { rateLimitFields } from "./rate-limit.ts";
import type { RouteHandler } from "./context.ts";
import { ROUTES, allowedMethods, type Route, type RouteName } from "./route-table.ts";
import { jsonResponse, secured, securityHeaders } from "./responses.ts";
import { add } from "./routes/add.ts";
import { deleteReceipt } from "./routes/delete.ts";
import { feed } from "./routes/feed.ts";
import { jobExport, jobState, startAppUserJob } from "./routes/jobs.ts";
import { login } from "./routes/login.ts";
import { status } from "./routes/status.ts";
import { apiReference } from "./routes/docs.ts";
import { openApiDocument } from "./routes/openapi.ts";

/**
 * Each route's handler, by its name in the route table: a route added to the table without one
 * fails the typecheck here.
 */
const HANDLERS: { [Name in RouteName]: RouteHandler<Name> } = {
  login,
  add,
  delete: deleteReceipt,
  exportAppUser: startAppUserJob("export"),
  eraseAppUser: startAppUserJob("erasure"),
  openapi: openApiDocument,
  docs: apiReference,
  events: feed,
  status,
  job: jobState,
  jobExport,
};

/**
 * Builds the Hono app over an isolate's memory: src/api/index.ts hands it the isolate's one;
 * a test that calls it bare gets a cold isolate of its own.
 */
export function createApp(isolate: IsolateState = newIsolateState()): Hono<ApiBindings> {
  const app = new Hono<ApiBindings>();
  // The security headers go on whatever answers, the error model's and a route's own Response alike.
  app.use(requestLog, releaseUnreadBody, securityHeaders);
  const routes = Object.entries(ROUTES) as [RouteName, Route][];
  // Before the settings are read, so that a 500 from a broken setting carries the fields too.
  for (const [, route] of routes) {
    if (route.limit) app.use(route.path, rateLimitFields(route.limit));
  }
  app.use(loadIsolate(isolate));
  for (const [name, route] of routes) {
    // Safe: the checks chained before it set the variables its entry promises the handler.
    const handler = HANDLERS[name] as (c: ApiContext) => Response | Promise<Response>;
    app.on(route.method, [route.path], ...routeChecks(route), handler);
    app.all(route.path, methodNotAllowed(route.method, allowedMethods(route)));
  }
  app.notFound((c) => {
    throw new ApiError(404, `Path ${truncate(c.req.path)} is not an operation of receipts.v2.`);
  });
  app.onError(renderError);
  return app;
}

async function requestLog(c: ApiContext, next: () => Promise<void>): Promise<void> {
  const started = Date.now();
  c.set("requestId", rayId(c.req.header("cf-ray")) ?? crypto.randomUUID());
  await next();
  const status = c.res.status;
  const error = c.error;
  logLine(status >= 500 ? "error" : "info", "request", {
    request_id: c.get("requestId"),
    method: c.req.method,
    route: truncate(c.req.path),
    status,
    client_id: c.get("clientId"),
    latency_ms: Date.now() - started,
    outcome: status < 400 ? "ok" : status >= 500 ? "failed" : "refused",
    cause: error instanceof ApiError ? (error.options.cause ?? error.detail) : error ? truncate(describeError(error)) : undefined,
  });
  recordRequest(c, status, Date.now() - started);
}

const KNOWN_PATHS = new Set<string>(Object.values(PATHS));

// The request's data point (src/shared/metrics.ts): Analytics Engine takes it without a round
// trip and sends it after the invocation, so nothing here waits for it. A chain_id goes in only as a usable identifying header value: anything else a till sent is not
// a chain, and might be anything.
function recordRequest(c: ApiContext, status: number, durationMs: number): void {
  const chain = identifyingText.safeParse(c.req.header("chain_id") ?? "");
  const point: MetricPoint = {
    kind: "request",
    route: knownRoute(c),
    outcome: status < 400 ? "ok" : status >= 500 ? "failed" : "refused",
    clientId: c.get("clientId"),
    chainId: chain.success ? chain.data : undefined,
    shard: c.get("shard"),
    method: KNOWN_METHODS.has(c.req.method) ? c.req.method : "other",
    status,
    durationMs,
    bytes: Number(c.req.header("content-length")) || 0,
  };
  writeMetric(c.env.METRICS, point);
}

// The route the request reached, as its path pattern (a job's path names no job), or "other".
function knownRoute(c: ApiContext): string {
  return matchedRoutes(c).map(({ path }) => path).find((path) => KNOWN_PATHS.has(path)) ?? "other";
}

const KNOWN_METHODS = new Set(["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]);

// wrangler dev wraps the Worker in a middleware that, once the Worker has answered, reads any
// body left unread to its end before the answer may leave: a declared body that never comes
// held login, delete, a 404 or a 413 for minutes. A cancelled body is one it leaves alone. A
// body someone took a reader of is add's, which cancels its own; a client that went away errors
// the stream, and then there is nothing to release.
async function releaseUnreadBody(c: ApiContext, next: () => Promise<void>): Promise<void> {
  await next();
  const body = c.req.raw.body;
  if (body !== null && !body.locked) await body.cancel().catch(() => undefined);
}

// Cloudflare's ray ID (16 hex digits and the location, "8f1c2a3b4d5e6f70-FRA") names the request
// in Cloudflare's own logs too. Where no edge sets the header, a client can send one: anything
// but that shape would let it put text of its choosing into the log and the 500 message.
function rayId(header: string | undefined): string | undefined {
  return header !== undefined && /^[0-9a-f]{16}-[A-Z]{3}$/.test(header) ? header : undefined;
}

// Hands every route the isolate's memory and the settings parsed in it.
function loadIsolate(isolate: IsolateState): (c: ApiContext, next: () => Promise<void>) => Promise<void> {
  return async (c, next) => {
    c.set("isolate", isolate);
    c.set("config", apiConfig(c.env, isolate.settings));
    await next();
  };
}

function methodNotAllowed(method: string, allow = method): (c: ApiContext) => never {
  return (c) => {
    throw new ApiError(405, `Method ${truncate(c.req.method)} is not allowed on ${c.req.path}; use ${method}.`, {
      headers: { allow },
    });
  };
}

function renderError(error: Error, c: ApiContext): Response {
  const support = supportPointer(c);
  if (error instanceof ApiError) {
    return secured(jsonResponse(errorBody(error, support), error.status, error.options.headers));
  }
  return secured(jsonResponse(internalErrorBody(c.get("requestId"), support), 500));
}

// A ConfigError leaves no config behind, and then the pointer cannot be named.
function supportPointer(c: ApiContext): SupportPointer {
  return c.get("config") ?? UNCONFIGURED_SUPPORT;
}

function truncate(text: string): string {
  return text.length > 200 ? `${text.slice(0, 200)}…` : text;
}
