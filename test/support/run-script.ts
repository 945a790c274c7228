/** Runs an operator script the way `npm run <name> --` does, against a throwaway local state. */
import { spawnSync } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";

export const ROOT = path.resolve(import.meta.dirname, "../..");

export interface ScriptResult {
  status: number | null;
  stdout: string;
  stderr: string;
}

/** A fresh local state directory (wrangler's --persist-to), so tests never touch `npm start`'s. */
export function freshState(): string {
  return mkdtempSync(path.join(tmpdir(), "receipts-state-"));
}

/** Runs `scripts/<name>.ts` with the project's Node, which `npm test` put first on PATH. */
export function runScript(name: string, args: string[], input?: string): ScriptResult {
  const result = spawnSync(process.execPath, [path.join(ROOT, "scripts", `${name}.ts`), ...args], {
    cwd: ROOT,
    encoding: "utf8",
    input,
    env: { ...process.env, NO_COLOR: "1" },
  });
  return { status: result.status, stdout: result.stdout, stderr: result.stderr };
}
