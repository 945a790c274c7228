/**
 * `npm run contract`: an outside check of the published contract. The OpenAPI document
 * (docs/openapi.json) is what integrators generate clients from, so real traffic goes through a
 * maintained validator this project did not write, Stoplight's Prism in proxy mode, in front of a
 * local `npm start`: the example checkout (`npm run example`), a feed read, every operation's
 * success and a request for each error example of the document. Prism checks every exchange
 * against the document; any response it finds in breach of it fails the run (exit 1), as does a
 * request that did not get the status of the example it stands for. It prints how many responses
 * were checked. CI runs it (.ci/run).
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { unstable_readConfig } from "wrangler";
import { freePort } from "../harness/ports.ts";
import { runCli } from "../scripts/lib/cli.ts";
import { PROJECT_ROOT } from "../scripts/lib/wrangler.ts";
import { PATHS } from "../src/shared/paths.ts";
import { newTokenKey } from "../src/shared/token-keys.ts";
import { newAuditHashKey } from "../src/shared/audit-hash-key.ts";
import committed from "../docs/openapi.json" with { type: "json" };
import { endGroup, npmRun, startGroup, waitUntil, type Started } from "./service.ts";
import { NOT_THROUGH_PRISM, sendTraffic, type Checked } from "./traffic.ts";

const USAGE = `Usage: npm run contract

  Runs npm start on a fresh local state and Stoplight's Prism in proxy mode in front of it, sends
  the example checkout, a feed read, each operation's success and every error example of
  docs/openapi.json through Prism, and fails on any response Prism finds in breach of the document.`;

interface ResponseShape {
  $ref?: string;
  content?: Record<string, { examples?: Record<string, unknown> }>;
}
const document = committed as unknown as {
  paths: Record<string, Record<string, { responses: Record<string, ResponseShape> }>>;
  components: { responses: Record<string, ResponseShape> };
};

await runCli(USAGE, async (argv) => {
  if (argv.length > 0) throw new Error(`Unexpected argument: ${argv[0]}`);
  await check();
});

async function check(): Promise<void> {
  const state = mkdtempSync(path.join(tmpdir(), "receipts-contract-"));
  const [port, inspectorPort, proxyPort] = [await freePort(), await freePort(), await freePort()];
  const tokenKey = newTokenKey();
  const vars = unstable_readConfig({ config: path.join(PROJECT_ROOT, "wrangler.jsonc") }).vars as Record<string, string>;
  const started: Started[] = [];
  try {
    const service = startGroup("npm", [
      "start", "--", "--port", String(port), "--inspector-port", String(inspectorPort), "--persist-to", state,
      // A key this run can sign expired tokens with; client and shard changes seen at once.
      "--var", `TOKEN_KEYS:${JSON.stringify({ keys: [tokenKey] })}`, "--var", `AUDIT_HASH_KEY:${newAuditHashKey()}`,
      "--var", "CLIENT_CACHE_SECONDS:0", "--var", "SHARD_STATES_SECONDS:0",
    ]);
    started.push(service);
    await waitUntil(service, "npm start", async () => (await fetch(`http://127.0.0.1:${port}/`).catch(() => null))?.status === 404);

    const prism = startGroup("npx", ["prism", "proxy", "docs/openapi.json", `http://127.0.0.1:${port}`, "--port", String(proxyPort), "--host", "127.0.0.1"]);
    started.push(prism);
    const proxy = `http://127.0.0.1:${proxyPort}`;
    await waitUntil(prism, "Prism", async () => (await fetch(`${proxy}${PATHS.openapi}`).catch(() => null))?.ok === true);

    const { checked, pos } = await sendTraffic({ proxy, state, tokenKey, issuer: vars.TOKEN_ISSUER!, audience: vars.TOKEN_AUDIENCE! }, expectedStatus);
    const example = await npmRun("example", ["--base-url", proxy], { RECEIPTS_CLIENT_ID: pos.client_id, RECEIPTS_CLIENT_SECRET: pos.client_secret, RECEIPTS_CHAIN_ID: "c1" });
    report(checked, example, prism.output());
  } finally {
    for (const group of started.reverse()) await endGroup(group);
    rmSync(state, { recursive: true, force: true });
  }
}

/** Prints what was checked; throws (exit 1) on any response violation or a request that missed its example. */
function report(checked: Checked[], example: string, prismLog: string): void {
  const missed = checked.filter((each) => each.expected !== undefined && each.status !== each.expected);
  const unknown = checked.filter((each) => each.expected === undefined);
  const uncovered = documentedExamples().filter(([operation, name]) => !checked.some((each) => each.operation === operation && each.example === name) && !NOT_THROUGH_PRISM[name]);
  // Prism's own log covers the example's requests too: every answer it forwarded, every violation.
  const forwarded = prismLog.split("\n").filter((line) => line.includes("Received forward response")).length;
  const unrouted = prismLog.split("\n").filter((line) => line.includes("Selected route not found")).length;
  const responseViolations = prismLog.split("\n").filter((line) => /Violation: response/.test(line));
  const requestViolations = prismLog.split("\n").filter((line) => /Violation: request/.test(line)).length;

  for (const each of checked) {
    const own = each.violations.filter((violation) => violation.location[0] === "response");
    const mark = own.length > 0 || (each.expected !== undefined && each.status !== each.expected) ? "FAIL" : "ok";
    console.log(`${mark.padEnd(4)}  ${each.operation.padEnd(30)}  ${each.example.padEnd(22)}  ${each.status}${own.map((v) => `\n      ${v.location.join(".")}: ${v.message}`).join("")}`);
  }
  console.log(`\nnpm run example through Prism:\n${example.trim().replace(/^/gm, "  ")}`);
  console.log(`\nNot sent through Prism: ${Object.entries(NOT_THROUGH_PRISM).map(([name, why]) => `${name} (${why})`).join("; ")}.`);
  console.log(
    `\nPrism checked ${forwarded - unrouted} responses against docs/openapi.json (${checked.length} listed above; the rest the failed logins before the 429 and the example's): ` +
      `${responseViolations.length} response violations; ${requestViolations} request violations, the error examples' deliberate ones.`,
  );
  const problems = [
    ...responseViolations.map((line) => `response violation: ${line.replace(/^.*Violation: /, "")}`),
    ...missed.map((each) => `${each.operation} ${each.example}: answered ${each.status}, the document's example is a ${each.expected}`),
    ...unknown.map((each) => `${each.operation} ${each.example}: no such example in the document`),
    ...uncovered.map(([operation, name]) => `${operation} ${name}: an error example of the document with no request here`),
    ...(unrouted > 0 ? [`${unrouted} requests matched no operation of the document`] : []),
  ];
  if (problems.length > 0) throw new Error(`\n${problems.join("\n")}`);
}

/** The status under which the document gives the error example `name` of an operation. */
function expectedStatus(pathName: string, method: string, name: string): number | undefined {
  const responses = document.paths[pathName]?.[method]?.responses ?? {};
  for (const [status, response] of Object.entries(responses)) {
    const resolved = response.$ref ? document.components.responses[response.$ref.split("/").at(-1)!]! : response;
    if (resolved.content?.["application/json"]?.examples?.[name]) return Number(status);
  }
  return undefined;
}

/** Every error example of the document, as [operation, name]. */
function documentedExamples(): [string, string][] {
  return Object.entries(document.paths).flatMap(([pathName, item]) =>
    Object.keys(item).flatMap((method) => {
      const responses = item[method]!.responses;
      return Object.values(responses).flatMap((response) => {
        const resolved = response.$ref ? document.components.responses[response.$ref.split("/").at(-1)!]! : response;
        return Object.keys(resolved.content?.["application/json"]?.examples ?? {}).map((name): [string, string] => [`${method.toUpperCase()} ${pathName}`, name]);
      });
    }),
  );
}
