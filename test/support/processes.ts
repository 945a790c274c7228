/** Starting `npm start` or `wrangler dev` from a test, and making sure nothing of it outlives the test. */
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { once } from "node:events";
import { expect } from "vitest";
import { freePort, portIsFree } from "../../harness/ports.ts";
import { ROOT } from "./run-script.ts";

/**
 * Starts `command` in a process group of its own, so that a test sees every descendant and can end
 * them all; `output()` is what it has printed so far.
 */
export function startGroup(
  command: string,
  args: string[],
  extraEnv: Record<string, string> = {},
): { child: ChildProcess; output: () => string } {
  const child = spawn(command, args, {
    cwd: ROOT,
    detached: true,
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, NO_COLOR: "1", WRANGLER_SEND_METRICS: "false", ...extraEnv },
  });
  let output = "";
  for (const stream of [child.stdout!, child.stderr!]) stream.on("data", (chunk: Buffer) => void (output += chunk));
  return { child, output: () => output };
}

/**
 * Starts `npm start` on `state` with a port and an inspector port of its own (two copies at once
 * would otherwise race for the inspector's 9229, docs/api.md#local-use), and waits until it
 * serves.
 */
export async function startNpmStart(state: string, devArgs: readonly string[] = []): Promise<{ child: ChildProcess; port: number }> {
  const [port, inspectorPort] = [await freePort(), await freePort()];
  const { child, output } = startGroup("npm", ["start", "--", "--port", String(port), "--inspector-port", String(inspectorPort), "--persist-to", state, ...devArgs]);
  await waitForWorker(port, output);
  return { child, port };
}

/** Waits until the Worker at `port` answers (404 for the root path), for up to 90 s. */
export async function waitForWorker(port: number, output: () => string): Promise<void> {
  await waitFor(async () => (await fetch(`http://127.0.0.1:${port}/`).catch(() => null))?.status === 404, 90_000, output);
}

/** Ends what is left of the process group `child` leads: SIGTERM, then SIGKILL after 10 s. */
export async function endGroup(child: ChildProcess): Promise<void> {
  const group = child.pid!;
  if (groupMembers(group).length === 0) return;
  process.kill(-group, "SIGTERM");
  await waitFor(async () => groupMembers(group).length === 0, 10_000, () => "").catch(() => {
    if (groupMembers(group).length > 0) process.kill(-group, "SIGKILL");
  });
}

/**
 * Sends `signal` to npm alone, as a container stop or a process manager sends it, and expects
 * `npm start` (started with {@link startNpmStart}, serving on `port`) to end wrangler dev and both
 * workerd with it, freeing the port (docs/api.md#local-use). The files that start `npm start`
 * for their own tests end it so, each with a signal of its own.
 */
export async function expectNpmStartStopsOn(signal: "SIGTERM" | "SIGINT", child: ChildProcess, port: number): Promise<void> {
  const npm = child.pid!;
  expect(groupMembers(npm).filter((command) => command.includes("workerd"))).toHaveLength(2);
  const exited = once(child, "exit");
  process.kill(npm, signal);
  await exited;
  await waitFor(async () => groupMembers(npm).length === 0, 15_000, () => groupMembers(npm).join("\n"));
  expect(await portIsFree(port)).toBe(true);
}

/** The commands still running in process group `group`. */
export function groupMembers(group: number): string[] {
  const table = execFileSync("ps", ["-eo", "pgid=,args="], { encoding: "utf8" });
  return table
    .split("\n")
    .map((line) => /^\s*(\d+)\s+(.*)$/.exec(line))
    .filter((match) => match !== null && Number(match[1]) === group)
    .map((match) => match![2]!);
}

/** Polls `condition` every 250 ms; throws with `detail()` when `timeoutMs` pass first. */
export async function waitFor(condition: () => Promise<boolean>, timeoutMs: number, detail: () => string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`still waiting after ${timeoutMs} ms:\n${detail()}`);
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}
