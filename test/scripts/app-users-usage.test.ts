/**
 * docs/api.md#erasure, docs/api.md#export, docs/operations.md "Jobs": what `npm run app-users`
 * and the job commands refuse before they reach a service. None needs `npm start`, so these run
 * beside the other files, each command in a process of its own at once; the commands against
 * `npm start` are in test/scripts/app-users.test.ts, which runs alone.
 */
import { writeFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { freePort } from "../../harness/ports.ts";
import { ROOT, freshState, runScriptAsync } from "../support/run-script.ts";

describe("docs/api.md#erasure npm run app-users: bad arguments, usage and exit 2", () => {
  it.concurrent.each([
    ["no command", []],
    ["an unknown command", ["forget", "au-1"]],
    ["no app_user_id", ["erase"]],
    ["two app_user_ids", ["erase", "au-1", "au-2"]],
    ["an unknown flag", ["erase", "au-1", "--force"]],
    ["an empty app_user_id", ["erase", ""]],
    ["white space at an end", ["erase", " au-1"]],
    ["a control character", ["erase", "au-\u0007"]],
    ["a non-ASCII character", ["erase", "au-é"]],
    ["257 characters", ["erase", "a".repeat(257)]],
    ["--remote with --port", ["erase", "au-1", "--remote"]],
    ["a port that is not a number", ["erase", "au-1", "--port", "x"]],
    ["export without an app_user_id", ["export"]],
    ["export of two app_user_ids", ["export", "au-1", "au-2"]],
    ["export with an unknown flag", ["export", "au-1", "--no-wait"]],
    ["export with a control character", ["export", "au-\u0007"]],
    ["export --json without --out: the file itself goes to standard output", ["export", "au-1", "--json"]],
    ["export --out without a file", ["export", "au-1", "--out"]],
    ["export --remote with --port", ["export", "au-1", "--remote"]],
  ])("%s", async (_label, args) => {
    const result = await runScriptAsync("app-users", args.includes("--remote") ? [...args, "--port", "1"] : args);
    expect(result.status, result.stderr).toBe(2);
    expect(result.stderr).toContain("Usage: npm run app-users");
    expect(result.stdout).toBe("");
  });
});

describe("docs/operations.md Jobs: a command that finds no npm start says where it looked", () => {
  it.concurrent("a refused connection on --port names the address tried and how to name another: exit 1, nothing started", async () => {
    const closed = await freePort();
    const commands = [["app-users", ["erase", "au-1"]], ["jobs", ["list"]], ["archive", ["run"]]] as const;
    const results = await Promise.all(commands.map(([name, args]) => runScriptAsync(name, [...args, "--port", String(closed)])));
    for (const [index, result] of results.entries()) {
      const [name] = commands[index]!;
      expect(result.status, `${name}: ${result.stderr}`).toBe(1);
      expect(result.stdout).toBe("");
      expect(result.stderr.trim().split("\n")).toEqual([
        `Nothing answers at http://localhost:${closed} (--port): start the service with npm start, or name the port it serves on with --port <port> (or its state with --persist-to <dir>; --remote for the deployment).`,
      ]);
    }
  });

  it.concurrent("a recorded port where nothing answers any more names the record", async () => {
    const other = freshState();
    const closed = await freePort();
    // A live process (this one) with a port nothing serves: npm start ended without its exit handler.
    writeFileSync(path.join(other, "npm-start.json"), JSON.stringify({ port: closed, pid: process.pid }));
    const result = await runScriptAsync("jobs", ["list", "--persist-to", other]);
    expect(result.status, result.stderr).toBe(1);
    expect(result.stderr).toContain(`Nothing answers at http://localhost:${closed} (recorded by npm start in ${path.relative(ROOT, path.join(other, "npm-start.json"))}):`);
  });
});
