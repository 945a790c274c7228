/**
 * `npm run openapi`: writes docs/openapi.json from the schemas (src/api/openapi/document.ts).
 * Run it after changing a schema or an operation's description; a test fails until you do.
 */
import { writeFileSync } from "node:fs";
import path from "node:path";
import { serializeOpenApiDocument } from "../src/api/openapi/document.ts";
import { PROJECT_ROOT } from "./lib/wrangler.ts";

const target = path.join(PROJECT_ROOT, "docs", "openapi.json");
writeFileSync(target, serializeOpenApiDocument());
console.log(`Wrote ${path.relative(process.cwd(), target) || target}.`);
