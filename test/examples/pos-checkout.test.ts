/**
 * docs/api.md#local-use `npm run example`: it goes where `--base-url` says, and issues no client
 * when nothing answers there, so a failed run leaves no stray client behind.
 */
import { spawnSync } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { freePort } from "../../harness/ports.ts";
import { ROOT, freshState } from "../support/run-script.ts";

/** `npm run example -- <args>`, with the project's Node; never with a client from the environment. */
function example(...args: string[]): { status: number | null; stdout: string; stderr: string } {
  const { RECEIPTS_CLIENT_ID: _id, RECEIPTS_CLIENT_SECRET: _secret, RECEIPTS_BASE_URL: _url, ...env } = process.env;
  const result = spawnSync(process.execPath, [path.join(ROOT, "examples/pos-checkout.ts"), ...args], { cwd: ROOT, encoding: "utf8", env });
  return { status: result.status, stdout: result.stdout, stderr: result.stderr };
}

describe("docs/api.md#local-use npm run example", () => {
  it("--base-url with nothing listening: exit 1 naming that URL, and no client issued", async () => {
    const url = `http://127.0.0.1:${await freePort()}`;
    const result = example("--base-url", url);
    expect(result.status, result.stderr).toBe(1);
    expect(result.stderr).toContain(`No receipts.v2 answers at ${url}`);
    expect(result.stdout).not.toContain("Issued client");
  });

  it("a bad argument: the usage and exit 2", () => {
    const result = example("--base-url", "not a url");
    expect(result.status).toBe(2);
    expect(result.stderr).toContain("Usage: npm run example");
  });

  it("--help: the usage on standard output, exit 0", () => {
    const result = example("--help");
    expect(result.status, result.stderr).toBe(0);
    expect(result.stdout).toMatch(/^Usage: npm run example/);
  });

  it("without --base-url it goes to the port npm start recorded in its state, as the operator commands do", async () => {
    const port = await freePort();
    const state = freshState();
    mkdirSync(state, { recursive: true });
    // This test's process stands for the npm start that recorded it: the record names a live process.
    writeFileSync(path.join(state, "npm-start.json"), `${JSON.stringify({ port, pid: process.pid })}\n`);
    const result = example("--persist-to", state);
    expect(result.status, result.stderr).toBe(1);
    expect(result.stderr).toContain(`No receipts.v2 answers at http://127.0.0.1:${port}`);
    expect(result.stdout).not.toContain("Issued client");
  });
});
