/**
 * The service's Workflow instances ("jobs"): start one, describe one, list them, locally in
 * `npm start` (through the local API that `wrangler workflows --local --port` calls) or in the
 * deployment (through `wrangler workflows`).
 * Shared by `npm run app-users -- erase|export`, `npm run archive -- run` and `npm run jobs`.
 */
import { once } from "node:events";
import net from "node:net";
import { setTimeout as sleep } from "node:timers/promises";
import { erasureOfPart } from "../../src/shared/job-ids.ts";
import { UsageError, positiveInteger } from "./cli.ts";
import { recordFile, recordedPort, stateDirectory } from "./start-record.ts";
import { wrangler } from "./wrangler.ts";

/** The Workflows of wrangler.jsonc, by the kind `npm run jobs` shows. */
export const JOB_WORKFLOWS = { erasure: "receipts-v2-erasure", export: "receipts-v2-export", archive: "receipts-v2-archive" } as const;

/** A kind of job. */
export type JobKind = keyof typeof JOB_WORKFLOWS;

/** Where jobs run: the deployment, or `npm start` on a local port. */
export type JobTarget = { remote: true } | { remote: false; port: number };

/** The port `npm start` (wrangler dev) listens on unless told otherwise. */
export const DEFAULT_PORT = 8787;

/** The options of every command on jobs; {@link jobTargetOf} reads them. */
export const JOB_TARGET_OPTIONS = {
  remote: { type: "boolean" },
  port: { type: "string" },
  "persist-to": { type: "string" },
} as const;

/**
 * The target that `--remote`, `--port <n>` or `--persist-to <dir>` names. Without `--port`, the
 * port that `npm start` recorded in the local state it serves (scripts/lib/start-record.ts), else
 * 8787. A local target must answer: a refused connection names the address tried and how to name
 * another, before wrangler's bare "fetch failed".
 */
export async function jobTargetOf(values: { remote?: boolean; port?: string; "persist-to"?: string }): Promise<JobTarget> {
  if (values.remote && (values.port !== undefined || values["persist-to"] !== undefined)) {
    throw new UsageError(`--remote and ${values.port !== undefined ? "--port" : "--persist-to"} exclude each other.`);
  }
  if (values.remote) return { remote: true };
  const stateDir = stateDirectory(values["persist-to"]);
  const recorded = recordedPort(stateDir);
  const port = values.port !== undefined ? positiveInteger("--port", values.port) : (recorded ?? DEFAULT_PORT);
  if (!(await answers(port))) {
    const why = values.port !== undefined ? "--port" : recorded !== undefined ? `recorded by npm start in ${recordFile(stateDir)}` : `the default: no running npm start recorded a port in ${recordFile(stateDir)}`;
    throw new Error(
      `Nothing answers at http://localhost:${port} (${why}): start the service with npm start, or name the port it serves on with --port <port>` +
        ` (or its state with --persist-to <dir>; --remote for the deployment).`,
    );
  }
  return { remote: false, port };
}

/** Whether something accepts a connection on `port` of localhost, where wrangler will ask. */
async function answers(port: number): Promise<boolean> {
  const socket = net.connect({ port, host: "localhost" });
  try {
    await once(socket, "connect");
    return true;
  } catch {
    return false;
  } finally {
    socket.destroy();
  }
}

/** A step of an instance as wrangler describes it. */
interface DescribedStep {
  name: string;
  type: string;
  success: boolean | null;
  start: string | null;
  end: string | null;
}

/** An instance as `wrangler workflows instances describe --json` prints it. */
export interface DescribedJob {
  id: string;
  status: string;
  queued?: string;
  start: string | null;
  end: string | null;
  output: unknown;
  error: { name: string; message: string } | null;
  steps: DescribedStep[];
}

/**
 * One job as `npm run jobs` shows it. An erasure over many shards runs in parts, child instances
 * of its Workflow (docs/scale.md §6): a part's kind is "erasure part", and `part_of` names its
 * erasure (its ID, cut to 64 characters).
 */
export interface JobSummary {
  id: string;
  kind: JobKind | "erasure part";
  part_of: string | null;
  state: string;
  steps_done: number;
  steps: number;
  started: string | null;
  ended: string | null;
  error: string | null;
}

/** States after which an instance changes no more unless an operator restarts it. */
const ENDED = new Set(["complete", "errored", "terminated"]);

/**
 * Starts an instance of `kind` with `params`, under `id` when given (an export's instance is named
 * by its job, whose file lies under that ID), else a fresh one; returns its ID.
 */
export async function startJob(kind: JobKind, params: unknown, target: JobTarget, id?: string): Promise<string> {
  if (!target.remote) {
    const body = JSON.stringify({ params, ...(id !== undefined && { id }) });
    return (await localWorkflows<{ id: string }>(target, `/${JOB_WORKFLOWS[kind]}/instances`, { method: "POST", headers: { "Content-Type": "application/json" }, body })).id;
  }
  const named = id === undefined ? [] : ["--id", id];
  const output = wrangler(["workflows", "trigger", JOB_WORKFLOWS[kind], JSON.stringify(params), ...named, "--json"], { retryLocked: false });
  return (JSON.parse(jsonPart(output)) as { id: string }).id;
}

/** An instance of `kind` as wrangler describes it. */
export async function describeJob(kind: JobKind, id: string, target: JobTarget): Promise<DescribedJob> {
  if (!target.remote) {
    return { ...(await localWorkflows<Omit<DescribedJob, "id">>(target, `/${JOB_WORKFLOWS[kind]}/instances/${encodeURIComponent(id)}`)), id };
  }
  const output = wrangler(["workflows", "instances", "describe", JOB_WORKFLOWS[kind], id, "--json"]);
  return JSON.parse(jsonPart(output)) as DescribedJob;
}

/**
 * Polls an instance until it ended (complete, errored or terminated) and returns it: a deployed
 * one each second (a poll is a wrangler run), a local one five times as often (a poll is a
 * request to npm start, and a command waited half a second on average past its job's end).
 */
export async function waitForJob(kind: JobKind, id: string, target: JobTarget, pauseMs = target.remote ? 1000 : 200): Promise<DescribedJob> {
  for (;;) {
    const job = await describeJob(kind, id, target);
    if (ENDED.has(job.status)) return job;
    await sleep(pauseMs);
  }
}

/**
 * The IDs of every instance of `kind`, newest first. A local Workflow also lists, without a
 * status, an ID it was only asked to describe and never ran: no job, left out.
 */
export async function listJobIds(kind: JobKind, target: JobTarget): Promise<string[]> {
  return (await listJobs(kind, target)).map((instance) => instance.id);
}

/** Every instance of `kind`, newest first, with its status (as {@link listJobIds} filters them). */
export async function listJobs(kind: JobKind, target: JobTarget): Promise<{ id: string; status: string }[]> {
  const instances = target.remote
    ? (JSON.parse(jsonPart(wrangler(["workflows", "instances", "list", JOB_WORKFLOWS[kind], "--json"]))) as Listed[])
    : (await localWorkflows<Listed[]>(target, `/${JOB_WORKFLOWS[kind]}/instances`)).sort((a, b) => (b.created_on ?? "").localeCompare(a.created_on ?? ""));
  return instances.flatMap((instance) => (instance.status === undefined ? [] : [{ id: instance.id, status: instance.status }]));
}

/** An instance as a listing shows it. */
interface Listed {
  id: string;
  status?: string;
  created_on?: string;
}

/**
 * A call on the Workflows of a local `npm start`, through the API its runtime serves for
 * `wrangler workflows --local` (what that command calls, without a wrangler start each time);
 * its answer's result. Fails as wrangler does: "Local API error: <the runtime's message>".
 */
async function localWorkflows<T>(target: { port: number }, workflowPath: string, init?: RequestInit): Promise<T> {
  const response = await fetch(`http://localhost:${target.port}/cdn-cgi/local/explorer/api/workflows${workflowPath}`, init);
  const body = (await response.json().catch(() => null)) as { success?: boolean; result?: T; errors?: { message: string }[] } | null;
  if (!response.ok || !body?.success) throw new Error(`Local API error: ${body?.errors?.[0]?.message ?? `HTTP ${response.status}`}`);
  return body.result as T;
}

/** An instance in the terms `npm run jobs` prints. Steps done: the steps that succeeded. */
export function summary(kind: JobKind, job: DescribedJob): JobSummary {
  const steps = job.steps.filter((step) => step.type === "step");
  const partOf = kind === "erasure" ? erasureOfPart(job.id) : undefined;
  return {
    id: job.id,
    kind: partOf ? "erasure part" : kind,
    part_of: partOf ?? null,
    state: job.status,
    steps_done: steps.filter((step) => step.success === true).length,
    steps: steps.length,
    started: job.start,
    ended: job.end,
    error: job.error ? `${job.error.name}: ${job.error.message}` : null,
  };
}

/** Jobs newest first, each erasure's parts right after it, in their order. */
export function newestFirst(jobs: readonly JobSummary[]): JobSummary[] {
  const byStart = (a: JobSummary, b: JobSummary) => (b.started ?? "").localeCompare(a.started ?? "");
  const partsOf = (erasure: JobSummary) =>
    jobs.filter((job) => job.part_of !== null && job.part_of === erasure.id.slice(0, job.part_of.length)).sort((a, b) => a.id.localeCompare(b.id, "en", { numeric: true }));
  const placed = jobs.filter((job) => job.part_of === null).sort(byStart).flatMap((job) => [job, ...partsOf(job)]);
  // Parts whose erasure is no longer listed (its state expired before theirs) still show.
  return [...placed, ...jobs.filter((job) => !placed.includes(job)).sort(byStart)];
}

/** What an operator runs to start a failed instance again (docs/operations.md). */
export function restartCommand(kind: JobKind, id: string, target: JobTarget): string {
  return `npx wrangler workflows instances restart ${JOB_WORKFLOWS[kind]} ${id}${target.remote ? "" : ` --local --port ${target.port}`}`;
}

// Wrangler may print a banner or a warning before the JSON it was asked for.
function jsonPart(output: string): string {
  const start = output.search(/^[[{]/m);
  if (start === -1) throw new Error(`wrangler printed no JSON:\n${output}`);
  return output.slice(start);
}
