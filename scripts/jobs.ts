/**
 * Operators look at the service's jobs, its Workflow instances (docs/operations.md "Jobs"):
 * each one's kind, state, steps done of steps, start, end and error, locally in `npm start` or
 * in the deployment.
 */
import { UsageError, parse, runCommands, table } from "./lib/cli.ts";
import {
  JOB_TARGET_OPTIONS,
  JOB_WORKFLOWS,
  describeJob,
  jobTargetOf,
  listJobIds,
  newestFirst,
  restartCommand,
  summary,
  type JobKind,
  type JobSummary,
} from "./lib/jobs.ts";

const USAGE = `Usage: npm run jobs -- list [--json] [--remote | --port <port> | --persist-to <dir>]
       npm run jobs -- show <id> [--json] [--remote | --port <port> | --persist-to <dir>]

  list        every job (Workflow instance) of the service, newest first: ID, kind (erasure,
              export, archive), state, steps done of steps, start, end, error; an
              erasure's parts (kind "erasure part") follow it; with --json an array of {"id", "kind", "part_of", "state",
              "steps_done", "steps", "started", "ended", "error"}
  show <id>   one job, and for a failed one the command that runs it again (for a part:
              its erasure's)

  --remote             the deployed service instead of 'npm start'
  --port <port>        the port of 'npm start' (default: the one it recorded, else 8787)
  --persist-to <dir>   the local state of 'npm start -- --persist-to <dir>', whose port it recorded`;

const HEADER = ["ID", "KIND", "STATE", "STEPS", "STARTED", "ENDED", "ERROR"] as const;

await runCommands(USAGE, { list, show });

async function list(argv: string[]): Promise<void> {
  const { values, positionals } = parse(argv, { json: { type: "boolean" }, ...JOB_TARGET_OPTIONS });
  if (positionals.length > 0) throw new UsageError(`Unexpected argument: ${positionals[0]}`);
  const target = await jobTargetOf(values);
  const found: JobSummary[] = [];
  for (const kind of kinds()) for (const id of await listJobIds(kind, target)) found.push(summary(kind, await describeJob(kind, id, target)));
  const jobs = newestFirst(found);
  console.log(values.json ? JSON.stringify(jobs) : table(HEADER, jobs.map(row)));
}

async function show(argv: string[]): Promise<void> {
  const { values, positionals } = parse(argv, { json: { type: "boolean" }, ...JOB_TARGET_OPTIONS });
  if (positionals.length !== 1) throw new UsageError(positionals.length === 0 ? "No job ID given." : `Unexpected argument: ${positionals[1]}`);
  const id = positionals[0]!;
  if (!/^[A-Za-z0-9_-]{1,100}$/.test(id)) throw new UsageError(`Not a job ID: ${JSON.stringify(id)}`);
  const target = await jobTargetOf(values);
  const found = await findJob(id, target);
  if (!found) throw new Error(`No job ${id}.`);
  const { job } = found;
  if (values.json) {
    console.log(JSON.stringify(job));
    return;
  }
  console.log(table(HEADER, [row(job)]));
  if (job.state !== "errored" && job.state !== "terminated") return;
  // A failed part has failed its erasure: the erasure, run again, starts parts of its own.
  if (job.part_of) console.log(`\nPart of erasure ${job.part_of}, which it failed. Run that again with: ${restartCommand(found.kind, job.part_of, target)}`);
  else console.log(`\nRun it again with: ${restartCommand(found.kind, id, target)}`);
}

function row(job: JobSummary): string[] {
  return [job.id, job.kind, job.state, `${job.steps_done}/${job.steps}`, job.started ?? "-", job.ended ?? "-", job.error ?? ""];
}

function kinds(): JobKind[] {
  return Object.keys(JOB_WORKFLOWS) as JobKind[];
}

// Wrangler fails for an ID its Workflow does not know ("... not found"): then it is not a job of
// that kind, and the next kind is asked, only if this one did not know it (a local Workflow lists
// the ID of every describe it was asked for, found or not). Any other failure (no `npm start`, no
// network) is the answer.
async function findJob(id: string, target: Parameters<typeof describeJob>[2]): Promise<{ kind: JobKind; job: JobSummary } | undefined> {
  for (const kind of kinds()) {
    try {
      return { kind, job: summary(kind, await describeJob(kind, id, target)) };
    } catch (error) {
      if (!/not found/i.test((error as Error).message)) throw error;
    }
  }
  return undefined;
}
