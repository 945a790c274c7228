/** Runs an operator script the way `npm run <name> --` does, against a throwaway local state, or in-process. */
import { spawn, spawnSync, type ChildProcessByStdio } from "node:child_process";
import type { Readable } from "node:stream";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { format } from "node:util";
import { cliStatus } from "../../scripts/lib/cli.ts";

export const ROOT = path.resolve(import.meta.dirname, "../..");

/**
 * The bound of a test whose work is a run of operator commands one after another, each a process
 * that starts wrangler or a runtime: on a 2-core machine with the suite beside it and a core
 * kept busy, such tests took up to 148 s (`shards -- migrate` over three shards), 146 s (`shards
 * -- add`) and 127 s (eleven `clients` commands), two to four times their time alone.
 */
export const PROCESSES_MS = 480_000;

// Far longer than any command takes (an export or erasure waits for its job); a hung one is killed.
const SCRIPT_TIMEOUT_MS = 180_000;

export interface ScriptResult {
  status: number | null;
  stdout: string;
  stderr: string;
}

/** A fresh local state directory (wrangler's --persist-to), so tests never touch `npm start`'s. */
export function freshState(): string {
  return mkdtempSync(path.join(tmpdir(), "receipts-state-"));
}

/**
 * Runs `scripts/<name>.ts` with the project's Node, which `npm test` put first on PATH, with the
 * test's environment and `env` over it (undefined removes a variable).
 */
export function runScript(name: string, args: string[], input?: string, env: Record<string, string | undefined> = {}): ScriptResult {
  // A command that hangs fails its test rather than blocking the whole run.
  const result = spawnSync(process.execPath, [path.join(ROOT, "scripts", `${name}.ts`), ...args], {
    cwd: ROOT,
    encoding: "utf8",
    input,
    env: scriptEnv(env),
    timeout: SCRIPT_TIMEOUT_MS,
  });
  return { status: result.status, stdout: result.stdout, stderr: result.stderr };
}

/**
 * {@link runScript} without blocking this process: for two commands at once, and for a long
 * command while this process holds a local state open (workerd closes a connection left idle
 * while the process is blocked, and the next call on it fails).
 */
export function runScriptAsync(name: string, args: string[], env: Record<string, string | undefined> = {}): Promise<ScriptResult> {
  // Standard input at its end, as runScript gives it: `shards -- add` whose migrations fail
  // waits for its input to end (60 s, not 6, with input from a pipe held open for 60 s).
  return collected(spawn(process.execPath, [path.join(ROOT, "scripts", `${name}.ts`), ...args], { cwd: ROOT, env: scriptEnv(env), stdio: ["ignore", "pipe", "pipe"] }));
}

/**
 * Runs the project's wrangler (first on PATH under `npm test`) without blocking this process, for
 * a read beside other commands; its standard output, or an error with what it printed.
 */
export async function runWranglerAsync(args: string[]): Promise<string> {
  const { status, stdout, stderr } = await collected(spawn("wrangler", args, { cwd: ROOT, stdio: ["ignore", "pipe", "pipe"] }));
  if (status !== 0) throw new Error(stderr || stdout);
  return stdout;
}

/** What a child process printed, and its exit status, once it has ended. */
function collected(child: ChildProcessByStdio<null, Readable, Readable>): Promise<ScriptResult> {
  let stdout = "";
  let stderr = "";
  child.stdout.setEncoding("utf8").on("data", (chunk: string) => (stdout += chunk));
  child.stderr.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk));
  return new Promise((resolve, reject) => {
    child.on("error", reject);
    child.on("close", (status) => resolve({ status, stdout, stderr }));
  });
}

/** The test's environment with `env` over it (undefined removes a variable), and no colours. */
function scriptEnv(env: Record<string, string | undefined>): NodeJS.ProcessEnv {
  // Cast: the generated Workers types declare the API Worker's vars on process.env, which a
  // script's environment does not carry.
  return Object.fromEntries(Object.entries({ ...process.env, NO_COLOR: "1", ...env }).filter(([, value]) => value !== undefined)) as NodeJS.ProcessEnv;
}

/**
 * Runs an operator script's commands in-process as `runScript` runs the script: the same exit
 * status, standard output and error output, for the cases where the process itself is not what
 * is tested (each script keeps real runs of its commands too).
 */
export async function runInProcess(usage: string, main: (argv: string[]) => Promise<void> | void, args: string[]): Promise<ScriptResult> {
  const out: string[] = [];
  const err: string[] = [];
  const { log, error } = console;
  console.log = (...parts: unknown[]) => void out.push(`${format(...parts)}\n`);
  console.error = (...parts: unknown[]) => void err.push(`${format(...parts)}\n`);
  try {
    const status = await cliStatus(usage, main, args);
    return { status, stdout: out.join(""), stderr: err.join("") };
  } finally {
    Object.assign(console, { log, error });
  }
}
