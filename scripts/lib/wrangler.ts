/**
 * Runs wrangler for the operator scripts. They are started through `npm run`, which puts the
 * project's own Node and wrangler first on PATH.
 */
import { spawn, spawnSync } from "node:child_process";
import { setTimeout as sleep } from "node:timers/promises";
import path from "node:path";
import { UsageError } from "./cli.ts";

/** The project root, so scripts work from any directory. */
export const PROJECT_ROOT = path.resolve(import.meta.dirname, "../..");

/** Where a command acts: the local state of `npm start`, or the deployed resources. */
export interface Target {
  remote: boolean;
  /** Local state directory other than `.wrangler/state` (wrangler's --persist-to). */
  persistTo?: string;
}

/** Wrangler's flags that select local or remote storage for a target. */
export function targetFlags(target: Target): string[] {
  if (target.remote) return ["--remote"];
  return target.persistTo ? ["--local", "--persist-to", target.persistTo] : ["--local"];
}

/** The options every command that acts on storage takes; `targetOf` reads them. */
export const TARGET_OPTIONS = {
  remote: { type: "boolean" },
  "persist-to": { type: "string" },
} as const;

/** The target that the common flags `--remote` and `--persist-to <dir>` name. */
export function targetOf(values: { remote?: boolean; "persist-to"?: string }): Target {
  if (values.remote && values["persist-to"]) throw new UsageError("--remote and --persist-to exclude each other.");
  return values["persist-to"] ? { remote: false, persistTo: values["persist-to"] } : { remote: values.remote ?? false };
}

/**
 * Runs wrangler and returns its standard output; throws with its error output on failure. Two
 * commands on one local state (two terminals, or two racing `issue` commands) can find its
 * SQLite files locked by the other's runtime: such a run is made again after a short pause,
 * unless `retryLocked` is false (a write whose timing decides a race).
 */
export function wrangler(args: string[], options: { input?: string; retryLocked?: boolean } = {}): string {
  for (let attempt = 1; ; attempt += 1) {
    const result = spawnSync("wrangler", args, { ...SPAWN_OPTIONS, input: options.input, encoding: "utf8", maxBuffer: 64 * 1024 * 1024 });
    if (result.error) throw result.error;
    const pause = outcome(args, result.status, result.stdout, result.stderr, attempt, options.retryLocked);
    if (typeof pause === "string") return pause;
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, pause);
  }
}

/** {@link wrangler} without blocking: for commands that run side by side (`shards -- migrate`). */
export async function wranglerAsync(args: string[]): Promise<string> {
  for (let attempt = 1; ; attempt += 1) {
    const { status, stdout, stderr } = await new Promise<{ status: number | null; stdout: string; stderr: string }>((resolve, reject) => {
      const child = spawn("wrangler", args, { ...SPAWN_OPTIONS, stdio: ["ignore", "pipe", "pipe"] });
      let out = "";
      let err = "";
      child.stdout.on("data", (chunk: Buffer) => (out += chunk.toString()));
      child.stderr.on("data", (chunk: Buffer) => (err += chunk.toString()));
      child.on("error", reject);
      child.on("close", (code) => resolve({ status: code, stdout: out, stderr: err }));
    });
    const pause = outcome(args, status, stdout, stderr, attempt);
    if (typeof pause === "string") return pause;
    await sleep(pause);
  }
}

const SPAWN_OPTIONS = { cwd: PROJECT_ROOT, env: { ...process.env, WRANGLER_SEND_METRICS: "false", NO_COLOR: "1" } };

/** A run's standard output when it succeeded, the pause before the next attempt, or the error. */
function outcome(args: string[], status: number | null, stdout: string, stderr: string, attempt: number, retryLocked = true): string | number {
  if (status === 0) return stdout;
  const output = stderr || stdout;
  const retry = retryLocked && !args.includes("--remote") && output.includes("SQLITE_BUSY");
  if (retry && attempt < LOCKED_ATTEMPTS) return LOCKED_PAUSE_MS * attempt;
  throw new Error(`wrangler ${args[0]} ${args[1] ?? ""} failed:\n${output}`);
}

const LOCKED_ATTEMPTS = 5;
const LOCKED_PAUSE_MS = 400;
