/**
 * Operators erase an app user's data in every shard (docs/api.md#erasure, docs/operations.md "A
 * shopper asks to be forgotten"): the command records the erasure's request on the first shard
 * (migration 0020), starts the erasure's Workflow (src/api/workflows/erasure-workflow.ts) with the
 * request's ID alone in the running service, locally in `npm start` or in the deployment, and
 * waits for it to complete.
 */
import { recordErasureRequest } from "../src/storage/erasure-requests.ts";
import type { Erasure } from "../src/storage/erasure.ts";
import { UsageError, parse, runCommands, usableId } from "./lib/cli.ts";
import { execute } from "./lib/d1.ts";
import { JOB_TARGET_OPTIONS, jobTargetOf, restartCommand, startJob, waitForJob } from "./lib/jobs.ts";
import { targetShards } from "./lib/shards.ts";
import { targetOf } from "./lib/wrangler.ts";

const USAGE = `Usage: npm run app-users -- erase <app_user_id> [--json] [--no-wait] [--remote | --port <port> | --persist-to <dir>]

  erase <app_user_id>   erase every receipt of this app user created up to now in every
                        shard, with every stored copy of their data (Idempotency-Key answers
                        keep no ID, events not yet sent, failed notices); their audit records
                        keep a keyed hash in place of the ID; one app_user.erased event goes
                        to the app when the erasure completes. Starts the erasure as a job
                        (a Workflow instance) and waits for it, then prints the number of
                        receipts erased; with --json {"app_user_id", "receipts_erased", "job"}.
                        Running it again erases 0. An ID that starts with '-' goes after '--':
                        npm run app-users -- erase -- -user-7

  --no-wait             print the job's ID and return; 'npm run jobs -- show <id>' follows it
  --remote              run in the deployed service instead of 'npm start'
  --port <port>         the port of 'npm start' (default: the one it recorded, else 8787)
  --persist-to <dir>    the local state of 'npm start -- --persist-to <dir>', whose port it recorded,
                        and where the erasure's request is written`;

await runCommands(USAGE, { erase });

async function erase(argv: string[]): Promise<void> {
  const { values, positionals } = parse(argv, {
    json: { type: "boolean" },
    "no-wait": { type: "boolean" },
    ...JOB_TARGET_OPTIONS,
  });
  if (positionals.length === 0) throw new UsageError("No app_user_id given.");
  if (positionals.length > 1) throw new UsageError(`Unexpected argument: ${positionals[1]}`);
  // Any app_user_id that add accepts, a leading "-" too: it can only have come after "--".
  const appUserId = usableId("app_user_id", positionals[0]!, { optionLike: true });
  const target = await jobTargetOf(values);

  // The request, not the ID, goes into the instance's params: a Workflow keeps those where no erasure reaches.
  const storage = targetOf(values);
  const [first] = targetShards(storage);
  if (!first) throw new Error("No shards in the configs to erase from.");
  const requestId = crypto.randomUUID();
  await execute(storage, first, [recordErasureRequest(requestId, appUserId, new Date())]);
  const job = await startJob("erasure", { request_id: requestId }, target);
  if (values["no-wait"]) {
    console.log(values.json ? JSON.stringify({ app_user_id: appUserId, job }) : `Started erasure job ${job}: npm run jobs -- show ${job}`);
    return;
  }
  const ended = await waitForJob("erasure", job, target);
  if (ended.status !== "complete") {
    const cause = ended.error ? `${ended.error.name}: ${ended.error.message}` : ended.status;
    throw new Error(`Erasure job ${job} ${ended.status}: ${cause}\nRun it again with: ${restartCommand("erasure", job, target)}`);
  }
  const erasure = ended.output as Erasure;
  if (values.json) {
    console.log(JSON.stringify({ app_user_id: appUserId, receipts_erased: erasure.receipts_erased, job }));
  } else {
    const perShard = Object.entries(erasure.shards).map(([name, count]) => `${name}=${count}`).join(", ");
    console.log(`Erased ${erasure.receipts_erased} receipt${erasure.receipts_erased === 1 ? "" : "s"} of app user ${JSON.stringify(appUserId)} (${perShard}).`);
    console.log(`Event ${erasure.event.event_id} (app_user.erased) went to the app's queue; job ${job}.`);
  }
}
