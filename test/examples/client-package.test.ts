/**
 * The POS client as an integrator gets it: `npm pack` of src/client (its prepack builds dist/),
 * installed from the tarball into an empty project, then imported by plain JavaScript and
 * type-checked from TypeScript there, with nothing of this repository on the import path.
 */
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import openapi from "../../docs/openapi.json" with { type: "json" };

const ROOT = path.resolve(import.meta.dirname, "../..");
const PACKAGE_DIR = path.join(ROOT, "src/client");
const manifest = JSON.parse(readFileSync(path.join(PACKAGE_DIR, "package.json"), "utf8")) as { name: string; version: string };

let consumer = "";
let packed: string[] = [];

beforeAll(() => {
  const work = mkdtempSync(path.join(tmpdir(), "receipts-client-"));
  const [result] = JSON.parse(npm(["pack", PACKAGE_DIR, "--json", "--pack-destination", work], ROOT)) as {
    filename: string;
    files: { path: string }[];
  }[];
  packed = result!.files.map((file) => file.path);
  consumer = path.join(work, "consumer");
  mkdirSync(consumer);
  writeFileSync(path.join(consumer, "package.json"), JSON.stringify({ name: "till", version: "1.0.0", type: "module", private: true }));
  // Its one dependency (zod, for the body types) is in npm's cache since this project's own install.
  npm(["install", "--prefer-offline", "--no-audit", "--no-fund", path.join(work, result!.filename)], consumer);
}, 120_000);

describe("the POS client package, installed from its tarball", () => {
  it("holds the built client, its declarations and the changelog, not the TypeScript sources", () => {
    expect(packed).toContain("dist/client/index.js");
    expect(packed).toContain("dist/client/index.d.ts");
    expect(packed).toContain("CHANGELOG.md");
    expect(packed.filter((file) => file.endsWith(".ts") && !file.endsWith(".d.ts"))).toEqual([]);
  });

  it("has the API's version as its major version, and a changelog entry for its version", () => {
    expect(manifest.version.split(".")[0]).toBe(openapi.info.version);
    expect(readFileSync(path.join(PACKAGE_DIR, "CHANGELOG.md"), "utf8")).toContain(`## ${manifest.version}\n`);
  });

  it("imports by its name and works: a login and an add through the given fetch, and a return code's round trip", () => {
    const script = `
      import { ReceiptsClient, makeReturnCode, parseReturnCode } from ${JSON.stringify(manifest.name)};
      const calls = [];
      const answer = (data) => new Response(JSON.stringify({ data, status: "OK", status_code: 200 }), { headers: { "content-type": "application/json" } });
      const fetch = async (url, init) => {
        calls.push(new URL(url).pathname);
        return url.endsWith("/login")
          ? answer({ access_token: "t", expires_in: 3600, token_type: "Bearer" })
          : answer({ receipt_id: "r-1", chain_id: "c1", client_id: "pos-1", app_user_id: "au-1", created_at: "2026-11-22T13:03:05.123Z" });
      };
      const client = new ReceiptsClient({ baseUrl: "https://receipts.example.com", clientId: "pos-1", clientSecret: "s", fetch });
      const receipt = await client.add(
        { purchased_at: "2026-11-22T14:03:00+01:00", currency: "EUR", total: 299, line_items: [{ description: "Tea", quantity: 1, unit_price: 299, total: 299 }] },
        { chainId: "c1", appUserId: "au-1" },
      );
      const ids = parseReturnCode(makeReturnCode({ receiptId: receipt.receipt_id, appUserId: receipt.app_user_id }));
      console.log(JSON.stringify({ calls, ids }));
    `;
    const output = execFileSync("node", ["--input-type=module", "-e", script], { cwd: consumer, encoding: "utf8" });
    expect(JSON.parse(output)).toEqual({ calls: ["/receipts/v2/login", "/receipts/v2/add"], ids: { receiptId: "r-1", appUserId: "au-1" } });
  });

  it("gives TypeScript its types: a wrong use fails to compile where it stands", () => {
    writeFileSync(
      path.join(consumer, "till.ts"),
      `import { makeReturnCode, type Receipt } from ${JSON.stringify(manifest.name)};\n` +
        `export const body: Receipt = { purchased_at: "2026-11-22T14:03:00+01:00", currency: "EUR", total: 0, line_items: [] };\n` +
        `export const code: number = makeReturnCode({ receiptId: "r", appUserId: "u" });\n`,
    );
    const tsc = path.join(ROOT, "node_modules/typescript/bin/tsc");
    const args = [tsc, "--noEmit", "--strict", "--module", "nodenext", "--moduleResolution", "nodenext", "--lib", "es2023,dom", "--types", "", "till.ts"];
    let errors = "";
    try {
      execFileSync("node", args, { cwd: consumer, encoding: "utf8" });
    } catch (error) {
      errors = String((error as { stdout: string }).stdout);
    }
    expect(errors.trim().split("\n")).toEqual([expect.stringMatching(/^till\.ts\(3,14\): error TS2322: Type 'string' is not assignable to type 'number'\./)]);
  });
});

function npm(args: string[], cwd: string): string {
  return execFileSync("npm", args, { cwd, encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
}
