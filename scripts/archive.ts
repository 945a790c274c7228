/**
 * Operators run and watch the archive tier (docs/operations.md "The archive"): `run` starts the
 * move (src/api/workflows/archive-workflow.ts) on every shard or one, in the running service
 * (locally in `npm start`, or the deployment), and waits for it; `status` reads each shard's
 * tables: receipts still in D1 due by the archive's cutoff, what the archive holds, the last run.
 */
import path from "node:path";
import { archiveCutoff } from "../src/storage/archive/layout.ts";
import type { ArchiveRun } from "../src/storage/archive/move.ts";
import { archiveStatus, firstIdAt } from "../src/storage/archive/statements.ts";
import { archiveAfterMs } from "../src/shared/config.ts";
import { UsageError, parse, runCommands, table } from "./lib/cli.ts";
import { execute, onEachShard } from "./lib/d1.ts";
import { readDevVars } from "./lib/dev-vars.ts";
import { JOB_TARGET_OPTIONS, jobTargetOf, restartCommand, startJob, waitForJob } from "./lib/jobs.ts";
import { shardNameArgument, targetShards, type ConfigShard } from "./lib/shards.ts";
import { PROJECT_ROOT, TARGET_OPTIONS, targetOf } from "./lib/wrangler.ts";

const USAGE = `Usage: npm run archive -- run [--shard <name>] [--json] [--remote | --port <port> | --persist-to <dir>]
       npm run archive -- status [--json] [--remote | --persist-to <dir>]

  run       move every receipt due (made before the first day of the month that holds
            now less ARCHIVE_AFTER_DAYS; every receipt when it is 0) from its shard to the archive
            bucket now, on every shard or the one --shard names (the cron does it daily at
            03:00 UTC). Starts one job (Workflow instance) per shard and waits for them; prints
            per shard the receipts, objects and bytes moved; with --json an array of
            {"shard", "job", "receipts", "objects", "bytes", "complete"}
  status    per shard: receipts in D1 due by that cutoff ("due"), archived receipts,
            objects and bytes in the archive, the last run; with --json an array of
            {"shard", "due", "archived", "objects", "bytes", "last_run"}

  --remote             the deployed service instead of 'npm start'
  --port <port>        the port of 'npm start' (default: the one it recorded, else 8787)
  --persist-to <dir>   the local state of 'npm start -- --persist-to <dir>' (for run: whose port
                       it recorded)`;

await runCommands(USAGE, { run, status });

async function run(argv: string[]): Promise<void> {
  const { values, positionals } = parse(argv, { shard: { type: "string" }, json: { type: "boolean" }, ...JOB_TARGET_OPTIONS });
  if (positionals.length > 0) throw new UsageError(`Unexpected argument: ${positionals[0]}`);
  const shards = chosenShards(values.remote ?? false, values.shard);
  const target = await jobTargetOf(values);
  const jobs = [];
  for (const { name } of shards) jobs.push({ shard: name, job: await startJob("archive", { shard: name }, target) });
  const results = [];
  for (const { shard, job } of jobs) {
    const ended = await waitForJob("archive", job, target);
    if (ended.status !== "complete") {
      const cause = ended.error ? `${ended.error.name}: ${ended.error.message}` : ended.status;
      throw new Error(`Archive job ${job} (shard ${shard}) ${ended.status}: ${cause}\nRun it again with: ${restartCommand("archive", job, target)}`);
    }
    const { receipts, objects, bytes, complete } = ended.output as ArchiveRun;
    results.push({ shard, job, receipts, objects, bytes, complete });
  }
  if (values.json) {
    console.log(JSON.stringify(results));
    return;
  }
  console.log(
    table(
      ["SHARD", "JOB", "RECEIPTS", "OBJECTS", "BYTES", "COMPLETE"],
      results.map((r) => [r.shard, r.job, String(r.receipts), String(r.objects), String(r.bytes), r.complete ? "yes" : "no: run again"]),
    ),
  );
}

interface StatusRow {
  due: number;
  archived: number;
  objects: number;
  bytes: number;
  last_run_id: string | null;
  last_cutoff: string | null;
  last_started_at: string | null;
  last_finished_at: string | null;
  last_receipts: number | null;
}

async function status(argv: string[]): Promise<void> {
  const { values, positionals } = parse(argv, { json: { type: "boolean" }, ...TARGET_OPTIONS });
  if (positionals.length > 0) throw new UsageError(`Unexpected argument: ${positionals[0]}`);
  const target = targetOf(values);
  const shards = targetShards(target);
  const beforeId = firstIdAt(archiveCutoff(new Date(), await archiveAgeMs(shards[0]!, target.remote)));
  const rows: ({ shard: string } & StatusRow)[] = [];
  const failures = await onEachShard(shards, async (shard) => {
    const [row] = (await execute<StatusRow>(target, shard, [archiveStatus(beforeId)]))[0]!;
    rows.push({ shard: shard.name, ...row! });
  });
  const shown = rows.map(({ shard, due, archived, objects, bytes, ...last }) => ({
    shard,
    due,
    archived,
    objects,
    bytes,
    last_run:
      last.last_run_id === null
        ? null
        : { job: last.last_run_id, cutoff: last.last_cutoff, started_at: last.last_started_at, finished_at: last.last_finished_at, receipts: last.last_receipts },
  }));
  if (values.json) {
    console.log(JSON.stringify(shown));
  } else {
    console.log(
      table(
        ["SHARD", "IN_D1_PAST_AGE", "ARCHIVED", "OBJECTS", "BYTES", "LAST_RUN", "STARTED", "FINISHED", "MOVED"],
        shown.map((s) => [
          s.shard,
          String(s.due),
          String(s.archived),
          String(s.objects),
          String(s.bytes),
          s.last_run?.job ?? "-",
          s.last_run?.started_at ?? "-",
          s.last_run?.finished_at ?? (s.last_run ? "running or failed" : "-"),
          s.last_run ? String(s.last_run.receipts) : "-",
        ]),
      ),
    );
  }
  if (failures.length > 0) throw new Error(failures.map(({ message }) => message).join("\n"));
}

function chosenShards(remote: boolean, name: string | undefined): ConfigShard[] {
  const shards = targetShards({ remote });
  if (name === undefined) return shards;
  const wanted = shardNameArgument(name);
  const shard = shards.find((each) => each.name === wanted);
  if (!shard) throw new UsageError(`No shard ${wanted}: the shards are ${shards.map((each) => each.name).join(", ")}.`);
  return [shard];
}

// The archive age the service runs with: the config's ARCHIVE_AFTER_DAYS, which `npm start` takes
// from .dev.vars when that file sets it.
async function archiveAgeMs(shard: ConfigShard, remote: boolean): Promise<number> {
  // Loaded here alone: wrangler takes over half a second to load, which every other run paid.
  const { unstable_readConfig } = await import("wrangler");
  const vars = unstable_readConfig({ config: shard.config }).vars as Record<string, string>;
  const local = remote ? {} : readDevVars(path.join(PROJECT_ROOT, ".dev.vars"));
  return archiveAfterMs({ ARCHIVE_AFTER_DAYS: local.ARCHIVE_AFTER_DAYS ?? vars.ARCHIVE_AFTER_DAYS! });
}
