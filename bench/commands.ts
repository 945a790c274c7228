/**
 * `npm run bench:commands`: the wall time of the operator commands an operator runs most, each
 * through `npm run` as typed in a terminal, on a throwaway local state (migrated, served by its own
 * `npm start` for `status`). Prints each command's median over --runs runs (default 5), and exits
 * 1 when a median passes --goal seconds (default 2) or a command fails.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { freePort } from "../harness/ports.ts";
import { formatTable } from "../harness/table.ts";
import { parse, positiveInteger, runCli } from "../scripts/lib/cli.ts";
import { PROJECT_ROOT } from "../scripts/lib/wrangler.ts";

const USAGE = `Usage: npm run bench:commands -- [--runs <n>] [--goal <seconds>]

  Times clients issue|list|show, shards list, notices failed, audit and status through
  'npm run', each --runs times (default 5) on a throwaway local state, and prints each
  command's median and slowest run. Exit 1 when a median passes --goal (default 2 s) or a
  command fails.`;

/** A command's run: its exit status and wall time. */
interface Run {
  status: number | null;
  ms: number;
  stderr: string;
}

await runCli(USAGE, async (argv) => {
  const { values } = parse(argv, { runs: { type: "string" }, goal: { type: "string" } });
  const runs = values.runs === undefined ? 5 : positiveInteger("--runs", values.runs);
  const goalMs = (values.goal === undefined ? 2 : Number(values.goal)) * 1000;
  const state = mkdtempSync(path.join(tmpdir(), "receipts-bench-commands-"));
  const persist = ["--persist-to", state];
  let start: ChildProcess | undefined;
  try {
    const migrated = await npmRun("shards", ["migrate", ...persist]);
    if (migrated.status !== 0) throw new Error(`shards migrate failed: ${migrated.stderr}`);
    const ops = JSON.parse((await npmRun("clients", ["issue", "--ops", "--json", ...persist])).stdout) as { client_id: string; client_secret: string };
    const pos = JSON.parse((await npmRun("clients", ["issue", "--chain", "c1", "--json", ...persist])).stdout) as { client_id: string };
    const port = await freePort();
    start = spawn("npm", ["start", "--", "--port", String(port), "--inspector-port", String(await freePort()), ...persist], {
      cwd: PROJECT_ROOT,
      stdio: "ignore",
      detached: true,
    });
    await serving(port);
    const opsEnv = { RECEIPTS_OPS_CLIENT_ID: ops.client_id, RECEIPTS_OPS_CLIENT_SECRET: ops.client_secret };
    const commands: [string, string, string[], Record<string, string>?][] = [
      ["clients issue", "clients", ["issue", "--chain", "c1", "--json"]],
      ["clients list", "clients", ["list"]],
      ["clients show", "clients", ["show", pos.client_id]],
      ["shards list", "shards", ["list"]],
      ["notices failed", "notices", ["failed"]],
      ["audit", "audit", ["chain", "c1"]],
      ["status", "status", [], opsEnv],
    ];
    const rows: string[][] = [];
    let passed = true;
    for (const [label, script, args, env] of commands) {
      const times: Run[] = [];
      for (let i = 0; i < runs; i += 1) times.push(await npmRun(script, [...args, ...persist], env));
      const failed = times.find((run) => run.status !== 0);
      const sorted = times.map((run) => run.ms).sort((a, b) => a - b);
      const median = sorted[Math.floor(sorted.length / 2)]!;
      const ok = !failed && median <= goalMs;
      passed &&= ok;
      rows.push([label, seconds(median), seconds(sorted.at(-1)!), failed ? `exit ${failed.status}: ${failed.stderr.trim().split("\n")[0]}` : ok ? "ok" : "over goal"]);
    }
    console.log(formatTable(["COMMAND", "MEDIAN_S", "SLOWEST_S", "RESULT"], rows));
    if (!passed) throw new Error(`A command failed or its median passed ${goalMs / 1000} s.`);
  } finally {
    if (start?.pid) process.kill(-start.pid, "SIGTERM");
    await sleep(1000);
    rmSync(state, { recursive: true, force: true });
  }
});

/** Runs `npm run <script> -- <args>` and times it. */
async function npmRun(script: string, args: string[], env: Record<string, string> = {}): Promise<Run & { stdout: string }> {
  const started = performance.now();
  const child = spawn("npm", ["run", "--silent", script, "--", ...args], {
    cwd: PROJECT_ROOT,
    env: { ...process.env, NO_COLOR: "1", ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (chunk: Buffer) => (stdout += chunk));
  child.stderr.on("data", (chunk: Buffer) => (stderr += chunk));
  const status = await new Promise<number | null>((resolve) => child.on("close", resolve));
  return { status, ms: performance.now() - started, stdout, stderr };
}

/** Waits until `npm start` answers on `port`, for up to 90 s. */
async function serving(port: number): Promise<void> {
  const deadline = Date.now() + 90_000;
  while ((await fetch(`http://127.0.0.1:${port}/`).catch(() => null))?.status !== 404) {
    if (Date.now() > deadline) throw new Error(`npm start did not answer on port ${port} within 90 s.`);
    await sleep(250);
  }
}

function seconds(ms: number): string {
  return (ms / 1000).toFixed(2);
}
