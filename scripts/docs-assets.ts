/**
 * Copies Swagger UI's standalone bundle from node_modules, and the OpenAPI document from
 * docs/openapi.json, into the static assets that serve the API reference and the document
 * (docs/api.md#api-reference, #openapi-document). The copies are generated, not committed: 1.9 MB
 * of someone else's minified code would dwarf every diff, and the pinned devDependency already says
 * exactly which release it is. Wrangler runs this before every dev, deploy and build (the `build`
 * command of wrangler.jsonc), so `npm start`, `npm run build` and a deploy all have the files; the
 * test configuration runs it too.
 */
import { copyFileSync, mkdirSync, readFileSync, statSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";

const ROOT = path.resolve(import.meta.dirname, "..");

/** The folder that wrangler.jsonc's `assets` serves the reference's files from. */
export const DOCS_ASSETS_DIR = path.join(ROOT, "assets", "receipts", "v2", "docs");

// The bundle carries React and every plugin; the style sheet draws its icons as data: images, so
// nothing else (no font, no image) has to come along but the tab's icon.
const FILES = ["swagger-ui-bundle.js", "swagger-ui-bundle.js.LICENSE.txt", "swagger-ui.css", "favicon-32x32.png"];

// Where the OpenAPI document goes among the assets: the path the Worker answers it at
// (src/api/routes/openapi.ts reads it there and fills in its server).
const OPENAPI_ASSET = path.join(ROOT, "assets", "receipts", "v2", "openapi.json");

/** Writes the files the reference page loads; a no-op when they are already up to date. */
export function writeDocsAssets(): void {
  const source = path.dirname(createRequire(import.meta.url).resolve("swagger-ui-dist/package.json"));
  mkdirSync(DOCS_ASSETS_DIR, { recursive: true });
  for (const file of FILES) copyIfChanged(path.join(source, file), path.join(DOCS_ASSETS_DIR, file));
  copyIfChanged(path.join(ROOT, "docs", "openapi.json"), OPENAPI_ASSET);
}

function copyIfChanged(from: string, to: string): void {
  if (!sameContent(from, to)) copyFileSync(from, to);
}

function sameContent(from: string, to: string): boolean {
  try {
    return statSync(from).size === statSync(to).size && readFileSync(from).equals(readFileSync(to));
  } catch {
    return false;
  }
}

if (import.meta.main) writeDocsAssets();
