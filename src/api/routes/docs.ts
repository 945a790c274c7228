/** GET /receipts/v2/docs: the interactive API reference (docs/api.md#api-reference). */
import type { ApiContext } from "../context.ts";

// Relative to the page, so they follow it. Workers static assets serve them (wrangler.jsonc
// `assets`): the reference weighs nothing in the Worker's own bundle, and a request for one of
// them never wakes the Worker.
const ASSETS = {
  style: "docs/swagger-ui.css",
  icon: "docs/favicon-32x32.png",
  renderer: "docs/swagger-ui-bundle.js",
  start: "docs/init.js",
};

// Only this origin: the page must keep working on a closed network, and a third host that served
// a script here could read the tokens a reader types into "Try it out". Swagger UI sets its
// styles through the DOM and draws its icons as data: images.
const CONTENT_SECURITY_POLICY = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "font-src 'self'",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join("; ");

const PAGE = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>receipts.v2 API reference</title>
<link rel="stylesheet" href="${ASSETS.style}">
<link rel="icon" type="image/png" href="${ASSETS.icon}">
</head>
<body>
<noscript>This reference needs JavaScript; the document it shows is <a href="openapi.json">openapi.json</a>.</noscript>
<div id="reference"></div>
<script src="${ASSETS.renderer}"></script>
<script src="${ASSETS.start}"></script>
</body>
</html>
`;

/**
 * Serves the page that renders the OpenAPI document the service serves beside it: every
 * operation, header, error, example and webhook, with "Try it out" against this same origin.
 */
export function apiReference(c: ApiContext): Response {
  return c.html(PAGE, 200, {
    "cache-control": "public, max-age=300",
    "content-security-policy": CONTENT_SECURITY_POLICY,
    "referrer-policy": "no-referrer",
  });
}
