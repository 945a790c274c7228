/** docs/api.md#operators: every operator command prints its usage on --help and -h, and exits 0. */
import { describe, expect, it } from "vitest";
import { runScriptAsync } from "../support/run-script.ts";

const COMMANDS: [script: string, args: string[]][] = [
  ["clients", []],
  ["clients", ["issue"]],
  ["keys", []],
  ["notices", ["failed"]],
  ["shards", []],
  ["shards", ["close", "s1"]],
  ["app-users", ["erase"]],
  ["jobs", []],
  ["jobs", ["show"]],
  ["archive", []],
  ["archive", ["run"]],
  ["audit", []],
  ["audit", ["chain", "c1"]],
  ["shards", ["migrate"]],
  ["status", []],
  ["stats", []],
  ["check-migrations", []],
  ["deploy", []],
  ["rollback", []],
];

describe("docs/api.md#operators --help and -h on every operator command", () => {
  // Each case is a process of its own that does nothing but print: they run at once.
  it.concurrent.each(COMMANDS.flatMap(([script, args]) => ["--help", "-h"].map((flag) => [script, [...args, flag].join(" "), [...args, flag]] as const)))(
    "npm run %s -- %s: the usage on standard output, exit 0, nothing done",
    async (script, _label, args) => {
      const result = await runScriptAsync(script, [...args]);
      expect(result.status, result.stderr).toBe(0);
      expect(result.stdout).toMatch(new RegExp(`^Usage: npm run ${script}`));
      expect(result.stderr).toBe("");
    },
  );
});
