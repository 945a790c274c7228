/**
 * Operators erase an app user's data in every shard (docs/api.md#erasure, docs/operations.md "A
 * shopper asks to be forgotten"), or export it (docs/api.md#export): the command records the
 * job's request on the first shard (migrations 0020, 0021), starts the job's Workflow
 * (src/api/workflows/erasure-workflow.ts, export-workflow.ts) with the request's ID alone in the
 * running service, locally in `npm start` or in the deployment, and waits for it to complete;
 * an export's file is then read from the archive's bucket.
 */
import { writeFileSync } from "node:fs";
import path from "node:path";
import { parseAuditHashKey } from "../src/shared/audit-hash-key.ts";
import { OPERATOR_CLIENT, startJob as recordJob, type AppUserJob } from "../src/storage/app-user-jobs.ts";
import { recordErasureRequest } from "../src/storage/erasure-requests.ts";
import { pseudonym, type Erasure } from "../src/storage/erasure.ts";
import { exportChunkKey, type ExportSummary } from "../src/storage/export.ts";
import { UsageError, parse, runCommands, usableId } from "./lib/cli.ts";
import { execute } from "./lib/d1.ts";
import { readDevVars } from "./lib/dev-vars.ts";
import { JOB_TARGET_OPTIONS, jobTargetOf, restartCommand, startJob, waitForJob, type JobKind, type JobTarget } from "./lib/jobs.ts";
import { localState } from "./lib/local-state.ts";
import { localConfigPaths, targetShards, type ConfigShard } from "./lib/shards.ts";
import { PROJECT_ROOT, targetFlags, targetOf, wrangler, type Target } from "./lib/wrangler.ts";

const USAGE = `Usage: npm run app-users -- erase <app_user_id> [--json] [--no-wait] [--remote | --port <port> | --persist-to <dir>]
       npm run app-users -- export <app_user_id> [--out <file> [--json]] [--remote | --port <port> | --persist-to <dir>]

  erase <app_user_id>   erase every receipt of this app user created up to now in every
                        shard, with every stored copy of their data (Idempotency-Key answers
                        keep no ID, events not yet sent, failed notices); their audit records
                        keep a keyed hash in place of the ID; one app_user.erased event goes
                        to the app when the erasure completes. Starts the erasure as a job
                        (a Workflow instance) and waits for it, then prints the number of
                        receipts erased; with --json {"app_user_id", "receipts_erased", "job"}.
                        Running it again erases 0. An ID that starts with '-' goes after '--':
                        npm run app-users -- erase -- -user-7
  export <app_user_id>  export everything the service holds of this app user, as of the
                        export's instant: every receipt, live and archived, on every shard
                        (in our model, with its original and format where it came in DR
                        Retail), the audit records that name them, then a summary line.
                        Starts the export as a job and waits for it, then writes its NDJSON
                        file to standard output, or to --out <file> and prints the counts
                        (with --json {"app_user_id", "job", "out", "occurred_at", "receipts",
                        "archived_receipts", "audit_records", "by_chain", "archive_read"}).
                        The job's record names the app user by the keyed hash of
                        AUDIT_HASH_KEY: .dev.vars's locally; with --remote the environment's
                        AUDIT_HASH_KEY (the deployed secret cannot be read back)

  --out <file>          where the export's file goes (default: standard output)
  --no-wait             print the job's ID and return; 'npm run jobs -- show <id>' follows it
  --remote              run in the deployed service instead of 'npm start'
  --port <port>         the port of 'npm start' (default: the one it recorded, else 8787)
  --persist-to <dir>    the local state of 'npm start -- --persist-to <dir>', whose port it recorded,
                        and where the erasure's request is written`;

/** The bucket an export's file lies in (wrangler.jsonc). */
const ARCHIVE_BINDING = "ARCHIVE";

await runCommands(USAGE, { erase, export: exportData });

async function erase(argv: string[]): Promise<void> {
  const { values, positionals } = parse(argv, {
    json: { type: "boolean" },
    "no-wait": { type: "boolean" },
    ...JOB_TARGET_OPTIONS,
  });
  const appUserId = appUserIdOf(positionals);
  const target = await jobTargetOf(values);

  // The request, not the ID, goes into the instance's params: a Workflow keeps those where no
  // erasure reaches. The instance takes the request's ID, so a later erasure can tell whether it runs.
  const storage = targetOf(values);
  const first = firstShard(storage);
  const requestId = crypto.randomUUID();
  await execute(storage, first, [recordErasureRequest(requestId, appUserId, new Date())]);
  const job = await startJob("erasure", { request_id: requestId }, target, requestId);
  if (values["no-wait"]) {
    console.log(values.json ? JSON.stringify({ app_user_id: appUserId, job }) : `Started erasure job ${job}: npm run jobs -- show ${job}`);
    return;
  }
  const erasure = await outputOf<Erasure>("erasure", job, target);
  if (values.json) {
    console.log(JSON.stringify({ app_user_id: appUserId, receipts_erased: erasure.receipts_erased, job }));
  } else {
    const perShard = Object.entries(erasure.shards).map(([name, count]) => `${name}=${count}`).join(", ");
    console.log(`Erased ${erasure.receipts_erased} receipt${erasure.receipts_erased === 1 ? "" : "s"} of app user ${JSON.stringify(appUserId)} (${perShard}).`);
    console.log(`Event ${erasure.event.event_id} (app_user.erased) went to the app's queue; job ${job}.`);
  }
}

async function exportData(argv: string[]): Promise<void> {
  const { values, positionals } = parse(argv, { out: { type: "string" }, json: { type: "boolean" }, ...JOB_TARGET_OPTIONS });
  const appUserId = appUserIdOf(positionals);
  if (values.json && values.out === undefined) throw new UsageError("--json needs --out <file>: without it the export's file itself goes to standard output.");
  if (values.out === "") throw new UsageError("--out needs a file name.");
  const target = await jobTargetOf(values);
  const storage = targetOf(values);
  const first = firstShard(storage);
  const job: AppUserJob = {
    job_id: crypto.randomUUID(),
    kind: "export",
    client_id: OPERATOR_CLIENT,
    // An operator's command is never sent twice: a key of its own, which no app client's can meet.
    idempotency_key: crypto.randomUUID(),
    user_key: await pseudonym(appUserId, auditHashKey(storage)),
    created_at: new Date().toISOString(),
  };
  // The job's record lets an erasure of the user find this export's file; its request is the one
  // place its instance reads the app_user_id from.
  await execute(storage, first, recordJob(job, appUserId));
  await startJob("export", { request_id: job.job_id }, target, job.job_id);
  const summary = await outputOf<ExportSummary>("export", job.job_id, target);
  const file = await exportFile(storage, first, job.job_id);
  if (values.out === undefined) {
    process.stdout.write(file);
    return;
  }
  writeFileSync(values.out, file);
  if (values.json) {
    console.log(JSON.stringify({ app_user_id: appUserId, job: job.job_id, out: values.out, ...withoutJob(summary) }));
    return;
  }
  const chains = Object.entries(summary.by_chain).map(([chain, count]) => `${chain}=${count}`).join(", ");
  console.log(
    `Exported ${summary.receipts} receipt${summary.receipts === 1 ? "" : "s"} (${summary.archived_receipts} archived${chains && `; ${chains}`}) and ` +
      `${summary.audit_records} audit record${summary.audit_records === 1 ? "" : "s"} of app user ${JSON.stringify(appUserId)} as of ${summary.occurred_at} to ${values.out}; job ${job.job_id}.`,
  );
}

// Any app_user_id that add accepts, a leading "-" too: it can only have come after "--".
function appUserIdOf(positionals: readonly string[]): string {
  if (positionals.length === 0) throw new UsageError("No app_user_id given.");
  if (positionals.length > 1) throw new UsageError(`Unexpected argument: ${positionals[1]}`);
  return usableId("app_user_id", positionals[0]!, { optionLike: true });
}

// Where a job's request and record go: the first shard, by name.
function firstShard(storage: Target): ConfigShard {
  const [first] = targetShards(storage);
  if (!first) throw new Error("No shards in the configs to act on.");
  return first;
}

/** Waits for a job and returns its output; one that failed is an error naming how to run it again. */
async function outputOf<Output>(kind: JobKind, job: string, target: JobTarget): Promise<Output> {
  const ended = await waitForJob(kind, job, target);
  if (ended.status !== "complete") {
    const cause = ended.error ? `${ended.error.name}: ${ended.error.message}` : ended.status;
    const name = `${kind[0]!.toUpperCase()}${kind.slice(1)}`;
    throw new Error(`${name} job ${job} ${ended.status}: ${cause}\nRun it again with: ${restartCommand(kind, job, target)}`);
  }
  return ended.output as Output;
}

// The key of the hash that names an app user in the job's record, as the service has it.
function auditHashKey(storage: Target): Uint8Array {
  const text = storage.remote ? process.env.AUDIT_HASH_KEY : readDevVars(path.join(PROJECT_ROOT, ".dev.vars")).AUDIT_HASH_KEY;
  if (!text) {
    throw new Error(
      storage.remote
        ? "--remote needs the deployed AUDIT_HASH_KEY in the environment (the secret cannot be read back): AUDIT_HASH_KEY=$(cat audit-hash-key.txt) npm run app-users -- export ..."
        : "No AUDIT_HASH_KEY in .dev.vars: run npm start first, which writes it.",
    );
  }
  return parseAuditHashKey(text);
}

/**
 * An export's file: its chunks in order, 1, 2, … up to the one whose last line is the summary
 * (each step writes one, empty or not, so they follow on without a gap), from the archive's
 * bucket: in-process on the local state, or one `wrangler r2 object get` each (wrangler lists no
 * objects). A chunk gone before the summary is a file an erasure of the user took meanwhile.
 */
async function exportFile(storage: Target, first: ConfigShard, jobId: string): Promise<string> {
  const config = first.config ?? localConfigPaths().api;
  const read = storage.remote ? await remoteObject(config) : localObject(storage, config);
  const chunks: string[] = [];
  for (let number = 1; ; number += 1) {
    const chunk = await read(exportChunkKey(jobId, number));
    if (chunk === null) throw new Error(`The export's file is gone (chunk ${number} of job ${jobId}): was the app user erased meanwhile?`);
    chunks.push(chunk);
    if (chunk.trimEnd().split("\n").at(-1)?.startsWith('{"summary":')) return chunks.join("");
  }
}

function localObject(storage: Target, config: string): (key: string) => Promise<string | null> {
  const state = localState(storage, config);
  return (key) => state.r2(ARCHIVE_BINDING, async (bucket) => (await bucket.get(key))?.text() ?? null);
}

async function remoteObject(config: string): Promise<(key: string) => Promise<string | null>> {
  // Loaded here alone: wrangler takes over half a second to load, which every other run paid.
  const { unstable_readConfig } = await import("wrangler");
  const bucket = unstable_readConfig({ config }).r2_buckets.find((each: { binding: string }) => each.binding === ARCHIVE_BINDING) as { bucket_name?: string; jurisdiction?: string } | undefined;
  if (!bucket?.bucket_name) throw new Error(`No ${ARCHIVE_BINDING} bucket in ${config}.`);
  const jurisdiction = bucket.jurisdiction ? ["--jurisdiction", bucket.jurisdiction] : [];
  return async (key) => {
    try {
      return wrangler(["r2", "object", "get", `${bucket.bucket_name}/${key}`, "--pipe", ...jurisdiction, "-c", config, ...targetFlags({ remote: true })]);
    } catch (error) {
      if (/not found|does not exist/i.test((error as Error).message)) return null;
      throw error;
    }
  };
}

// The summary names the job already, as "job" beside it.
function withoutJob({ job_id: _job, ...counts }: ExportSummary): Omit<ExportSummary, "job_id"> {
  return counts;
}
