/**
 * The erasure of an app user as a Cloudflare Workflow (docs/api.md#erasure): `npm run app-users
 * -- erase` records the request on the first shard (migration 0020) and starts an instance with
 * `{"request_id"}`, never the app_user_id, which the instance's stored params would keep out of
 * any erasure's reach; each step reads the ID there, and the last one deletes the request with the
 * record of the erasure's event. The steps of src/storage/erasure.ts
 * run as durable steps, one D1 batch each, so that no invocation nears D1's 1,000 queries
 * whatever the number of shards, nothing waits on the operator's machine, and an instance cut
 * off anywhere resumes where it stopped with the same end state. Its output is what the erasure
 * did (`Erasure`).
 *
 * An instance may run 1,024 steps and an erasure takes one a shard (docs/scale.md §6), so the
 * erasure splits its shards into parts of at most ERASURE_PART_SHARDS, each a child instance of
 * this same Workflow (src/api/workflows/erasure-parts.ts), waits for them all, and only then
 * records and sends its one `app_user.erased` event.
 */
import { NonRetryableError } from "cloudflare:workflows";
import { WorkflowEntrypoint, type WorkflowEvent, type WorkflowStep } from "cloudflare:workers";
import { apiConfig } from "../../shared/config.ts";
import type { ApiEnv } from "../../shared/env.ts";
import { describeError, logLine } from "../../shared/log.ts";
import type { AppUserErasedEvent } from "../../shared/schemas.ts";
import type { ErasureParams } from "../../shared/types.ts";
import { checkFirstLayoutRenamed } from "../../storage/archive/legacy.ts";
import { readErasureRequest, recordErasureRequest } from "../../storage/erasure-requests.ts";
import { beginErasure, eraseArchive, eraseShards, recordErasure, type Erasure } from "../../storage/erasure.ts";
import type { JobShard, StepRunner } from "../../storage/steps.ts";
import { enqueueNotice } from "../events.ts";
import { startParts, waitForParts, type PartOutput } from "./erasure-parts.ts";
import { jobShardsOf, requestedJob } from "./durable.ts";

/** The kind `npm run jobs` shows for an erasure. */
export const ERASURE_JOB = "erasure";

/** The kind `npm run jobs` shows for a part of an erasure. */
export const ERASURE_PART_JOB = "erasure part";

/**
 * The erasure's Workflow, bound as ERASURE in wrangler.jsonc: an erasure, or a part of one. A
 * step that gives up fails the instance with an error log line (`"event": "job"`) an alert can
 * match; a part that fails fails its erasure, with the part's ID and error.
 */
export class ErasureWorkflow extends WorkflowEntrypoint<ApiEnv, ErasureParams> {
  override async run(event: Readonly<WorkflowEvent<ErasureParams>>, step: WorkflowStep): Promise<Erasure | PartOutput> {
    const part = event.payload?.part;
    try {
      const shards = jobShardsOf(this.env);
      // The request goes in the batch that records the erasure's event: an instance replayed after
      // that step finds every step's result stored and runs none.
      const requestId = event.payload?.request_id;
      const { appUserId, steps } = await requestedJob(step, shards, requestId, readErasureRequest);
      const { auditHashKey } = apiConfig(this.env);
      if (part) return { shards: await eraseShards(appUserId, part, shardsNamed(shards, part.shards), auditHashKey, steps) };
      return await this.erase(event.instanceId, requestId as string, appUserId, shards, step, steps);
    } catch (error) {
      logLine("error", "job", { job: part ? ERASURE_PART_JOB : ERASURE_JOB, instance_id: event.instanceId, outcome: "failed", cause: describeError(error) });
      throw error;
    }
  }

  // The erasure itself: the archive's layout checked, `begin`, its parts, then, once every shard
  // is erased, `record and send`.
  // Work on the app user's data outside the shards belongs between the two, after the parts.
  private async erase(
    id: string,
    requestId: string,
    appUserId: string,
    shards: readonly JobShard[],
    step: WorkflowStep,
    steps: StepRunner,
  ): Promise<Erasure> {
    const first = shards[0]!;
    const { auditHashKey, erasurePartShards } = apiConfig(this.env);
    await checkFirstLayoutRenamed(this.env.ARCHIVE, steps, (message) => new NonRetryableError(message));
    const start = await beginErasure(first, steps);
    const parts = await startParts(this.env.ERASURE, step, id, requestId, start, shards, erasurePartShards);
    const outputs = await waitForParts(this.env.ERASURE, step, parts);
    const perShard: PartOutput["shards"] = Object.assign({}, ...outputs.map((output) => output.shards));
    await eraseArchive(appUserId, start, perShard, shards, auditHashKey, this.env.ARCHIVE, steps);
    const send = (erased: AppUserErasedEvent) => enqueueNotice(this.env, erased);
    const endedRequests = (ids: string[]) => endedInstances(this.env.ERASURE, ids);
    return recordErasure(appUserId, start, perShard, first, auditHashKey, { steps, send, requestId, endedRequests });
  }
}

/**
 * Starts an erasure of `appUserId` as `npm run app-users -- erase` does: records the request on
 * the first shard, then starts the instance `id` with its request_id. Returns the instance's ID.
 */
export async function startErasure(env: ApiEnv, appUserId: string, id: string = crypto.randomUUID()): Promise<string> {
  await env.ERASURE.create({ id, params: { request_id: await requestErasure(env, appUserId, id) } });
  return id;
}

/**
 * Records a request to erase `appUserId` on the first shard; returns its request_id. The request
 * takes its instance's ID, as a job's does (src/api/routes/jobs.ts), so that a later erasure can
 * tell whether the instance still runs.
 */
export async function requestErasure(env: object, appUserId: string, requestId: string = crypto.randomUUID()): Promise<string> {
  const first = jobShardsOf(env)[0];
  if (!first) throw new Error("no shards to erase from");
  await first.run([recordErasureRequest(requestId, appUserId, new Date())]);
  return requestId;
}

/**
 * Which of `ids` name erasure instances that have ended (or never started): their requests are no
 * longer read. One still running keeps its request, or its next step would find it gone and fail
 * though its app user is being erased. A request's ID is its instance's (`requestErasure`).
 */
async function endedInstances(workflow: Workflow<ErasureParams>, ids: string[]): Promise<string[]> {
  const running = await Promise.all(ids.map((id) => stillRuns(workflow, id)));
  return ids.filter((_, index) => !running[index]);
}

async function stillRuns(workflow: Workflow<ErasureParams>, id: string): Promise<boolean> {
  let instance: WorkflowInstance;
  try {
    instance = await workflow.get(id);
  } catch (error) {
    // Only "no such instance" answers the question; anything else fails the step, which retries.
    if (/not_found/.test(String(error))) return false;
    throw error;
  }
  return !ENDED_STATUSES.has((await instance.status()).status);
}

const ENDED_STATUSES: ReadonlySet<InstanceStatus["status"]> = new Set(["complete", "errored", "terminated"]);

// A part names its shards; one this deployment no longer binds cannot be erased by retrying.
function shardsNamed(shards: readonly JobShard[], names: readonly string[]): JobShard[] {
  return names.map((name) => {
    const shard = shards.find((candidate) => candidate.name === name);
    if (!shard) throw new NonRetryableError(`shard ${name} is not bound to this Worker`);
    return shard;
  });
}
