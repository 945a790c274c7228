/**
 * How every answer of the API Worker leaves it, success or refusal (docs/api.md#common-rules and
 * "Security headers"): {@link securityHeaders} on every answer, whatever built it, and JSON.
 */
import type { ApiContext } from "./context.ts";

/**
 * Middleware, mounted first: every answer leaves never sniffed (a browser must not take a message
 * that echoes the request's path, or a till's text in an export, for HTML) and never cached
 * (tokens and receipts), unless its route chose a cache of its own (the public OpenAPI document
 * and reference page). Set here, after the route, so that a route building its own Response
 * cannot leave them out.
 */
export async function securityHeaders(c: ApiContext, next: () => Promise<void>): Promise<void> {
  await next();
  secured(c.res);
}

/**
 * The answer with the security headers of {@link securityHeaders}: also what the error model
 * renders, since an error thrown past a middleware (a path no route takes) is rendered after it.
 */
export function secured(response: Response): Response {
  response.headers.set("x-content-type-options", "nosniff");
  if (!response.headers.has("cache-control")) response.headers.set("cache-control", "no-store");
  return response;
}

/** JSON with the charset docs/api.md#common-rules asks for. */
export function jsonResponse(
  body: unknown,
  status: number,
  headers: Record<string, string> = {},
): Response {
  return jsonTextResponse(JSON.stringify(body), status, headers);
}

/** {@link jsonResponse} of JSON already written: stored text the answer carries byte for byte. */
export function jsonTextResponse(json: string, status: number, headers: Record<string, string> = {}): Response {
  return new Response(json, { status, headers: { "content-type": "application/json; charset=utf-8", ...headers } });
}
