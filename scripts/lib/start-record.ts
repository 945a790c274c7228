/**
 * Where a local `npm start` serves, recorded in the local state it serves from, so that the
 * commands that talk to it (`app-users`, `jobs`, `archive -- run`) find it on whatever port it was
 * given: `.wrangler/state/npm-start.json`, or `npm-start.json` in the directory of `--persist-to`
 * (docs/operations.md "Jobs"). Git-ignored with the rest of `.wrangler/`.
 */
import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";
import { PROJECT_ROOT } from "./wrangler.ts";

/** What `npm start` records: the port wrangler dev serves on and the process that serves it. */
export interface StartRecord {
  port: number;
  pid: number;
}

const FILE = "npm-start.json";

/** The local state directory that `--persist-to <dir>` names, or wrangler's own default. */
export function stateDirectory(persistTo?: string): string {
  return persistTo ? path.resolve(PROJECT_ROOT, persistTo) : path.join(PROJECT_ROOT, ".wrangler", "state");
}

/** The record's file in a state directory, relative to the project root as a person types it. */
export function recordFile(stateDir: string): string {
  return path.relative(PROJECT_ROOT, path.join(stateDir, FILE)) || FILE;
}

/** Records that this process serves `stateDir` on `port`; returns what forgets it again. */
export function recordStart(stateDir: string, port: number): () => void {
  const file = path.join(stateDir, FILE);
  const record: StartRecord = { port, pid: process.pid };
  mkdirSync(stateDir, { recursive: true });
  writeFileSync(file, `${JSON.stringify(record)}\n`);
  // Only this process's own record: a later `npm start` on the same state may have replaced it.
  return () => {
    if (readRecord(file)?.pid === process.pid) rmSync(file, { force: true });
  };
}

/**
 * The port of the `npm start` that serves `stateDir`, if one recorded it and still runs. A record
 * left by one that was killed outright names a process that is gone: no port.
 */
export function recordedPort(stateDir: string): number | undefined {
  const record = readRecord(path.join(stateDir, FILE));
  return record && isRunning(record.pid) ? record.port : undefined;
}

function readRecord(file: string): StartRecord | undefined {
  try {
    const record = JSON.parse(readFileSync(file, "utf8")) as Partial<StartRecord>;
    return Number.isInteger(record.port) && Number.isInteger(record.pid) ? (record as StartRecord) : undefined;
  } catch {
    return undefined;
  }
}

function isRunning(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    // EPERM: it runs, as another user.
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}

/**
 * The address of the `npm start` that serves `stateDir`: the port it recorded, else wrangler's
 * default 8787. What the examples talk to unless told otherwise, as the operator commands do.
 */
export function localServiceUrl(stateDir: string = stateDirectory()): string {
  return `http://127.0.0.1:${recordedPort(stateDir) ?? 8787}`;
}
