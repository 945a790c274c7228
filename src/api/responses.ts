/** How every answer of the API Worker leaves it, success or refusal (docs/api.md#common-rules). */

/**
 * JSON with the charset docs/api.md#common-rules asks for, never cached (tokens and receipts), and never
 * sniffed: a browser must not take a message that echoes the request's path for HTML.
 */
export function jsonResponse(
  body: unknown,
  status: number,
  headers: Record<string, string> = {},
): Response {
  return jsonTextResponse(JSON.stringify(body), status, headers);
}

/** {@link jsonResponse} of JSON already written: stored text the answer carries byte for byte. */
export function jsonTextResponse(json: string, status: number, headers: Record<string, string> = {}): Response {
  return new Response(json, {
    status,
    headers: {
      "content-type": "application/json; charset=utf-8",
      "cache-control": "no-store",
      "x-content-type-options": "nosniff",
      ...headers,
    },
  });
}
