/**
 * An ID or chain that no request could carry as given (HTTP strips white space at
 * either end), or that a later command would read as an option, is a bad argument.
 */
import { describe, expect, it } from "vitest";
import { freshState, runScript } from "../support/run-script.ts";

const state = freshState();
/** `clients <command> --persist-to <state> <args>`: the state flag before any `--` that args hold. */
const clients = (command: string, ...args: string[]) => runScript("clients", [command, "--persist-to", state, ...args]);

function expectBadArgument(result: ReturnType<typeof clients>): void {
  expect(result.status, result.stderr).toBe(2);
  expect(result.stderr).toContain("Usage: npm run clients --");
  expect(result.stdout).toBe("");
}

/** Values that could never arrive as the header value given, or would read as an option. */
const UNUSABLE_IDS: readonly (readonly [label: string, value: string])[] = [
  ["empty", ""],
  ["white space only", "   "],
  ["a space before", " pos-lead"],
  ["a space after", "pos-lead "],
  ["a tab inside", "pos\tlead"],
  ["a control character", "pos-\u0007lead"],
  ["a non-ASCII character", "pos-léad"],
  ["257 characters", `pos-${"x".repeat(253)}`],
  ["an option's spelling", "--remote"],
  ["a leading hyphen", "-pos"],
];

describe("operator arguments: docs/operations.md#clients", () => {
  describe.each(UNUSABLE_IDS)("%s", (_label, value) => {
    it("issue --client-id: usage, exit 2, nothing written", () => {
      expectBadArgument(clients("issue", "--chain", "c1", `--client-id=${value}`));
    });

    it("issue --chain: usage, exit 2, nothing written", () => {
      expectBadArgument(clients("issue", `--chain=${value}`, "--client-id", "pos-chain-check"));
    });

    it.each(["show", "disable", "enable", "rotate"])("%s <id>: usage, exit 2", (command) => {
      expectBadArgument(clients(command, "--", value));
    });
  });

  it("the issue's own example, --chain ' c1' --client-id ' lead', is refused", () => {
    expectBadArgument(clients("issue", "--chain", " c1", "--client-id", " lead"));
  });

  it("no record was written by any of them", () => {
    const listed = clients("list", "--json");
    expect(listed.status, listed.stderr).toBe(0);
    expect(JSON.parse(listed.stdout)).toEqual([]);
  });
});

describe("notices: event ids that read as options or carry white space", () => {
  const notices = (...args: string[]) => runScript("notices", ["replay", "--persist-to", state, "--", ...args]);
  const id = "019aa8a4-3c1e-7d2b-9f41-6c0e5b2d8a17";

  it.each([
    ["an option's spelling", "--remote"],
    ["a space before", ` ${id}`],
    ["a space after", `${id} `],
    ["empty", ""],
  ])("replay %s: usage, exit 2", (_label, value) => {
    const result = notices(value);
    expect(result.status, result.stderr).toBe(2);
    expect(result.stderr).toContain("Usage: npm run notices --");
    expect(result.stdout).toBe("");
  });
});
