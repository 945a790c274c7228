/**
 * The processes of `npm run contract`: a local `npm start` on a state of its own, Stoplight's Prism
 * in proxy mode in front of it, and the operator commands that issue and change its clients.
 */
import { execFile, spawn, type ChildProcess } from "node:child_process";
import { once } from "node:events";
import { setTimeout as sleep } from "node:timers/promises";
import { promisify } from "node:util";
import { PROJECT_ROOT } from "../scripts/lib/wrangler.ts";

/** A process group this run started, with everything it printed so far. */
export interface Started {
  child: ChildProcess;
  output: () => string;
}

/** Starts `command` in a process group of its own, its output kept for a failure's report. */
export function startGroup(command: string, args: string[]): Started {
  const child = spawn(command, args, { cwd: PROJECT_ROOT, detached: true, stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, NO_COLOR: "1", FORCE_COLOR: "0" } });
  let output = "";
  child.stdout!.on("data", (chunk: Buffer) => (output += chunk.toString()));
  child.stderr!.on("data", (chunk: Buffer) => (output += chunk.toString()));
  return { child, output: () => output };
}

/** Ends a group {@link startGroup} started: SIGTERM to all of it, SIGKILL after 10 s. */
export async function endGroup({ child }: Started): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = once(child, "exit");
  process.kill(-child.pid!, "SIGTERM");
  const ended = await Promise.race([exited.then(() => true), sleep(10_000).then(() => false)]);
  if (!ended) process.kill(-child.pid!, "SIGKILL");
}

/** Waits until `ready()` holds, for at most `timeoutMs`; a group that exits first is a failure. */
export async function waitUntil(started: Started, what: string, ready: () => Promise<boolean>, timeoutMs = 300_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await ready())) {
    if (started.child.exitCode !== null) throw new Error(`${what} exited before it was ready:\n${started.output()}`);
    if (Date.now() > deadline) throw new Error(`${what} was not ready after ${timeoutMs / 1000} s:\n${started.output()}`);
    await sleep(250);
  }
}

/**
 * Runs `npm run -s <script> -- <args>` and returns its standard output; throws with its errors.
 * Asynchronous, so that the connections kept alive to Prism see it close them meanwhile.
 */
export async function npmRun(script: string, args: string[], env: Record<string, string> = {}): Promise<string> {
  try {
    const { stdout } = await execFileAsync("npm", ["run", "-s", script, "--", ...args], { cwd: PROJECT_ROOT, encoding: "utf8", env: { ...process.env, ...env } });
    return stdout;
  } catch (error) {
    const { code, stderr, stdout } = error as { code?: number; stderr?: string; stdout?: string };
    throw new Error(`npm run ${script} -- ${args.join(" ")} failed (${code}):\n${stderr ?? ""}${stdout ?? ""}`);
  }
}

const execFileAsync = promisify(execFile);
