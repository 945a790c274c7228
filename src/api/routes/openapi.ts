/** GET /receipts/v2/openapi.json: the OpenAPI 3.1 document of receipts.v2 (docs/api.md). */
import type { ApiContext } from "../context.ts";
import { jsonResponse } from "../responses.ts";

/**
 * Serves the document `npm run openapi` generated into docs/openapi.json, which
 * scripts/docs-assets.ts copies into the Worker's static assets at this very path: the committed
 * file rather than the generator, whose converter would grow every cold start for an answer that
 * only changes with a deploy (a test proves the file is what the generator makes), and read from
 * the assets rather than bundled, so that its 18 KiB gzip stay out of the Worker's bundle.
 * wrangler.jsonc runs the Worker first on this path. Its one server is the origin that answered,
 * so that a tool's "Try it out" calls this very deployment rather than the committed file's local
 * address.
 */
export async function openApiDocument(c: ApiContext): Promise<Response> {
  const file = await c.env.ASSETS.fetch(new URL(c.req.path, c.req.url));
  if (!file.ok) throw new Error(`the OpenAPI document is not among the static assets (HTTP ${file.status})`);
  const document = await file.json<Record<string, unknown>>();
  const served = { ...document, servers: [{ url: new URL(c.req.url).origin, description: "This deployment" }] };
  // Public and the same for everyone of one origin: browser tools may fetch and cache it.
  return jsonResponse(served, 200, {
    "cache-control": "public, max-age=300",
    "access-control-allow-origin": "*",
  });
}
