/**
 * docs/operations.md: every long-running npm script stops with its children when the signal goes
 * to npm alone, as a container stop or a process manager sends it, so no port stays taken.
 */
import { once } from "node:events";
import { readFileSync } from "node:fs";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import type { ChildProcess } from "node:child_process";
import { freePort, portIsFree } from "../../harness/ports.ts";
import { endGroup, groupMembers, startGroup, waitFor } from "../support/processes.ts";
import { TEST_PUSH_SECRET } from "../support/keys.ts";
import { ROOT } from "../support/run-script.ts";

// The shell npm runs a script in does not pass a signal on; `exec` puts the command in its place.
// Miniflare's workerd ends with the Node process that started it, so soak and bench need no more.
const LONG_RUNNING = ["start", "test", "fuzz", "bench", "soak", "example", "receiver"];

let started: ChildProcess | undefined;
afterEach(async () => {
  if (started) await endGroup(started);
  started = undefined;
});

describe("docs/operations.md long-running scripts stop on a signal to npm", () => {
  it.each(["SIGTERM", "SIGINT"] as const)("npm run receiver: %s to npm ends the receiver and frees its port", async (signal) => {
    const port = await freePort();
    const { child, output } = startGroup("npm", ["run", "receiver", "--", "--port", String(port)], { APP_PUSH_SECRET: TEST_PUSH_SECRET });
    started = child;
    await waitFor(async () => !(await portIsFree(port)), 30_000, output);

    process.kill(child.pid!, signal);
    await once(child, "exit");
    await waitFor(async () => groupMembers(child.pid!).length === 0, 10_000, () => groupMembers(child.pid!).join("\n"));
    expect(await portIsFree(port)).toBe(true);
  }, 60_000);

  it.each(LONG_RUNNING)("npm run %s runs its command in the shell's place, so a signal reaches it", (name) => {
    const { scripts } = JSON.parse(readFileSync(path.join(ROOT, "package.json"), "utf8")) as { scripts: Record<string, string> };
    // Variable assignments may come first: `A=1 exec vitest run` keeps them for the command.
    expect(scripts[name]).toMatch(/^(?:[A-Z_]+=\S+ )*exec \S/);
  });
});
