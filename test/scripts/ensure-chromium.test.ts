/**
 * README "Test": `npm test`'s pretest (scripts/ensure-chromium.ts) lets the run start once the
 * browser of the API reference page's test is there, and otherwise stops it at once with one line
 * that says what to install. The install itself (root, apt-get) is proven from a fresh clone on a
 * machine without the package, not here: it changes the machine.
 */
import { describe, expect, it } from "vitest";
import { runScript } from "../support/run-script.ts";

describe("README Test: npm test's pretest makes sure of Chromium", () => {
  it("Chromium where CHROMIUM_PATH names it: nothing printed, exit 0", () => {
    const result = runScript("ensure-chromium", [], undefined, { CHROMIUM_PATH: process.execPath });
    expect(result.status, result.stderr).toBe(0);
    expect(result.stdout + result.stderr).toBe("");
  });

  it("CHROMIUM_PATH naming nothing: one line saying what to install, exit 1, no install tried", () => {
    const result = runScript("ensure-chromium", [], undefined, { CHROMIUM_PATH: "/nonexistent/chromium" });
    expect(result.status).toBe(1);
    expect(result.stdout).toBe("");
    expect(result.stderr.trim().split("\n")).toEqual([
      "npm test: CHROMIUM_PATH names /nonexistent/chromium, which does not exist: install Debian's chromium (as root: apt-get update && apt-get install -y chromium), or set CHROMIUM_PATH to a Chromium binary.",
    ]);
  });
});
