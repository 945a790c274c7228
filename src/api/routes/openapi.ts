/** GET /receipts/v2/openapi.json: the OpenAPI 3.1 document of receipts.v2 (docs/api.md). */
import document from "../../../docs/openapi.json";
import type { ApiContext } from "../context.ts";
import { jsonResponse } from "../responses.ts";

/**
 * Serves the document `npm run openapi` generated into docs/openapi.json. The committed file
 * rather than the generator: running z.toJSONSchema here would grow every cold start for an
 * answer that only changes with a deploy, and a test proves the file is what the generator makes.
 */
export function openApiDocument(_c: ApiContext): Response {
  // Public and the same for everyone: browser tools (Swagger UI, editors) may fetch and cache it.
  return jsonResponse(document, 200, {
    "cache-control": "public, max-age=300",
    "access-control-allow-origin": "*",
  });
}
