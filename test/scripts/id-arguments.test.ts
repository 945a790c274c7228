/**
 * An ID or chain that no request could carry as given (HTTP strips white space at either end), or
 * that a later command would read as an option, is a bad argument. The check itself is a pure
 * function, tested over the whole table; a few real runs prove each command path calls it before
 * writing anything.
 */
import { describe, expect, it } from "vitest";
import { UsageError, usableId } from "../../scripts/lib/cli.ts";
import { addHeaders } from "../../src/shared/schemas.ts";
import { freshState, runScript } from "../support/run-script.ts";

const state = freshState();
/** `clients <command> --persist-to <state> <args>`: the state flag before any `--` that args hold. */
const clients = (command: string, ...args: string[]) => runScript("clients", [command, "--persist-to", state, ...args]);

function expectBadArgument(result: ReturnType<typeof clients>): void {
  expect(result.status, result.stderr).toBe(2);
  expect(result.stderr).toContain("Usage: npm run clients --");
  expect(result.stdout).toBe("");
}

/** Values that could never arrive as the header value given. */
const UNCARRIABLE_IDS: readonly (readonly [label: string, value: string])[] = [
  ["empty", ""],
  ["white space only", "   "],
  ["a space before", " pos-lead"],
  ["a space after", "pos-lead "],
  ["a tab inside", "pos\tlead"],
  ["a control character", "pos-\u0007lead"],
  ["a non-ASCII character", "pos-léad"],
  ["257 characters", `pos-${"x".repeat(253)}`],
  ["a comma", "pos,lead"],
  ["two IDs joined, as a header sent twice arrives", "pos-1, pos-2"],
];

/** Values a request could carry, but that a later command would read as an option. */
const OPTION_LIKE_IDS: readonly (readonly [label: string, value: string])[] = [
  ["an option's spelling", "--remote"],
  ["a leading hyphen", "-pos"],
];

describe("operator arguments: which IDs are usable (docs/operations.md#clients)", () => {
  it.each(UNCARRIABLE_IDS)("%s: refused, even where an option-like ID is allowed", (_label, value) => {
    expect(() => usableId("--client-id", value)).toThrow(UsageError);
    expect(() => usableId("--client-id", value, { optionLike: true })).toThrow(UsageError);
  });

  it.each(OPTION_LIKE_IDS)("%s: refused, unless the command takes the ID after `--`", (_label, value) => {
    expect(() => usableId("--client-id", value)).toThrow(/--client-id starts with '-' and would read as an option/);
    expect(usableId("--client-id", value, { optionLike: true })).toBe(value);
  });

  it.each(["pos-lead", "p", `pos-${"x".repeat(252)}`, "pos_a-B.9~!#"])("%j: usable as given", (value) => {
    expect(usableId("--chain", value)).toBe(value);
  });

  it("the refusal names the flag and the value as sent", () => {
    expect(() => usableId("--chain", " c1")).toThrow('--chain has white space at either end, which HTTP strips: " c1"');
    expect(() => usableId("--chain", "c1,c2")).toThrow('--chain was sent more than once or holds a comma: "c1,c2"');
  });

  // app-users erase takes an app_user_id after `--`: it must refuse none that add stores a receipt
  // for, and accept none that add refuses (white space at the ends aside, which HTTP strips first).
  const SAMPLES: readonly (readonly [label: string, value: string])[] = [
    ...UNCARRIABLE_IDS,
    ...OPTION_LIKE_IDS,
    ["usable", "au-7f3c9e"],
    ["256 characters", "a".repeat(256)],
  ];
  it.each(SAMPLES)("%s: usable after `--` exactly when add accepts it as app_user_id", (_label, value) => {
    const addAccepts = addHeaders.shape.app_user_id.safeParse(value).success && value === value.trim();
    if (addAccepts) expect(usableId("app_user_id", value, { optionLike: true })).toBe(value);
    else expect(() => usableId("app_user_id", value, { optionLike: true })).toThrow(UsageError);
  });
});

describe("operator arguments: every clients command checks its IDs before it writes", () => {
  it("issue --client-id: usage, exit 2, nothing written", () => {
    expectBadArgument(clients("issue", "--chain", "c1", "--client-id=pos\tlead"));
  });

  it("issue --chain: usage, exit 2, nothing written", () => {
    expectBadArgument(clients("issue", "--chain=-pos", "--client-id", "pos-chain-check"));
  });

  it("disable -- --remote names no client: usage, exit 2", () => {
    expectBadArgument(clients("disable", "--", "--remote"));
  });

  it("--chain ' c1' --client-id ' lead', as a copied command line might hold them, is refused", () => {
    expectBadArgument(clients("issue", "--chain", " c1", "--client-id", " lead"));
  });

  it("issue --chain a,b (a list where --chain is given once per chain): usage, exit 2", () => {
    expectBadArgument(clients("issue", "--chain", "c1,c2", "--client-id", "pos-comma-chain"));
  });

  it("issue --client-id a,b, which could never log in: usage, exit 2", () => {
    expectBadArgument(clients("issue", "--chain", "c1", "--client-id", "pos-a,pos-b"));
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

describe("app-users and audit: an ID holding a comma names nobody a request could name", () => {
  it.each([
    // app-users talks to the running service (--port), so a refused ID must stop it before any contact.
    ["app-users", ["erase", "--port", "1", "--", "au-1,au-2"]],
    ["audit", ["chain", "c1,c2", "--persist-to", state]],
    ["audit", ["client", "--persist-to", state, "--", "pos-1, pos-2"]],
  ])("%s %j: usage, exit 2, nothing read or written", (script, args) => {
    const result = runScript(script, args);
    expect(result.status, result.stderr).toBe(2);
    expect(result.stderr).toContain(`Usage: npm run ${script} --`);
    expect(result.stderr).toContain("holds a comma");
    expect(result.stdout).toBe("");
  });
});
