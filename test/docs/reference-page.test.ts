/**
 * The API reference at /receipts/v2/docs, opened in a real headless Chromium against the API
 * Worker served by `wrangler dev`: it lists every operation and every event of the OpenAPI
 * document, everything it loads comes from the service, and nothing fails to load.
 */
import type { ChildProcess } from "node:child_process";
import { existsSync } from "node:fs";
import { chromium, type Browser } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import committed from "../../docs/openapi.json" with { type: "json" };
import { freePort } from "../../harness/ports.ts";
import { chromiumPath } from "../../scripts/lib/chromium.ts";
import { PATHS } from "../../src/shared/paths.ts";
import { TEST_AUDIT_HASH_KEY, TEST_TOKEN_KEYS } from "../support/keys.ts";
import { endGroup, startGroup, waitForWorker } from "../support/processes.ts";
import { freshState } from "../support/run-script.ts";

// Debian's chromium, which `npm test` installs first where it can (scripts/lib/chromium.ts).
const CHROMIUM = chromiumPath();
const SCREENSHOT = process.env.DOCS_SCREENSHOT ?? "/tmp/docs-page.png";

const QUIET_CHROMIUM = ["--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"];

/**
 * Bounds sized for a machine three times slower than the team's and busy. Swagger UI renders every
 * operation open (docExpansion "full") after the network is idle: with the team's machine at a
 * load of 16 the Worker answered 17 s after its start and the first operation showed 68.5 s after
 * the page was asked for (0.9 s of which to network idle); another machine of the kind, busy,
 * took 39.5 s with Chromium 156. Playwright's own 30 s default failed both.
 */
const SERVICE_START_MS = 180_000;
const PAGE_SHOWN_MS = 240_000;

let worker: ChildProcess | undefined;
let browser: Browser | undefined;
let origin = "";

beforeAll(async () => {
  if (!existsSync(CHROMIUM)) {
    throw new Error(`No Chromium at ${CHROMIUM}: \`npm test\` installs it (as root, with apt-get), or install Debian's chromium yourself, or set CHROMIUM_PATH.`);
  }
  const [port, inspectorPort] = [await freePort(), await freePort()];
  const { child, output } = startGroup("npx", [
    "wrangler", "dev", "--ip", "127.0.0.1", "--port", String(port), "--inspector-port", String(inspectorPort),
    "--persist-to", freshState(), "--var", `TOKEN_KEYS:${JSON.stringify(TEST_TOKEN_KEYS)}`,
    // The Worker's secrets, given here: a fresh clone (CI) has no .dev.vars to take them from.
    "--var", `AUDIT_HASH_KEY:${TEST_AUDIT_HASH_KEY}`,
  ]);
  worker = child;
  await waitForWorker(port, output);
  origin = `http://127.0.0.1:${port}`;
  // The sandbox needs user namespaces that CI's root containers do not have. The rest keep
  // Chromium from reaching out (updates, sync, field trials): on a closed network each such
  // connection is refused, and on a busy machine their retries compete with the page.
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ["--no-sandbox", ...QUIET_CHROMIUM] });
}, SERVICE_START_MS);

afterAll(async () => {
  await browser?.close();
  if (worker) await endGroup(worker);
});

describe("GET /receipts/v2/docs in a browser", () => {
  it("lists every operation and event, loads everything from the service and nothing fails", async () => {
    const page = await browser!.newPage({ viewport: { width: 1280, height: 900 } });
    const requested: string[] = [];
    const failed: string[] = [];
    page.on("request", (request) => requested.push(request.url()));
    page.on("requestfailed", (request) => failed.push(`${request.url()}: ${request.failure()?.errorText}`));
    page.on("response", (response) => void (response.status() >= 400 && failed.push(`${response.url()}: ${response.status()}`)));
    // A Content-Security-Policy refusal and a script error both land on the console as errors.
    page.on("console", (message) => void (message.type() === "error" && failed.push(`console: ${message.text()}`)));
    page.on("pageerror", (error) => failed.push(`page: ${error.message}`));

    const answer = await page.goto(`${origin}${PATHS.docs}`, { waitUntil: "networkidle", timeout: PAGE_SHOWN_MS });
    expect(answer?.status()).toBe(200);
    await page.locator(".opblock").first().waitFor({ timeout: PAGE_SHOWN_MS });

    const summaries = await page.locator(".opblock-summary").allInnerTexts();
    for (const [path, item] of Object.entries(committed.paths)) {
      for (const method of Object.keys(item)) {
        expect(summaries.some((text) => text.includes(method.toUpperCase()) && text.includes(path)), `${method} ${path}`).toBe(true);
      }
    }
    for (const event of Object.keys(committed.webhooks)) {
      expect(summaries.some((text) => text.includes("POST") && text.includes(event)), event).toBe(true);
    }
    const text = await page.locator("body").innerText();
    // The document the page shows is the one this service serves, with its own origin as server.
    expect(text).toContain(origin);

    await page.screenshot({ path: SCREENSHOT });
    expect(failed).toEqual([]);
    expect(requested.filter((url) => new URL(url).origin !== origin)).toEqual([]);
    expect(requested).toContain(`${origin}${PATHS.openapi}`);
  }, 2 * PAGE_SHOWN_MS);
});
