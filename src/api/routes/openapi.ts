/** GET /receipts/v2/openapi.json: the OpenAPI 3.1 document of receipts.v2 (docs/api.md). */
import document from "../../../docs/openapi.json";
import type { ApiContext } from "../context.ts";
import { jsonResponse } from "../responses.ts";

/**
 * Serves the document `npm run openapi` generated into docs/openapi.json. The committed file
 * rather than the generator: running z.toJSONSchema here would grow every cold start for an
 * answer that only changes with a deploy, and a test proves the file is what the generator makes.
 * Its one server is the origin that answered, so that a tool's "Try it out" calls this very
 * deployment rather than the committed file's local address.
 */
export function openApiDocument(c: ApiContext): Response {
  const served = { ...document, servers: [{ url: new URL(c.req.url).origin, description: "This deployment" }] };
  // Public and the same for everyone of one origin: browser tools may fetch and cache it.
  return jsonResponse(served, 200, {
    "cache-control": "public, max-age=300",
    "access-control-allow-origin": "*",
  });
}
