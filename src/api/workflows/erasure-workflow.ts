/**
 * The erasure of an app user as a Cloudflare Workflow (docs/api.md#erasure): `npm run app-users
 * -- erase` starts an instance with `{"app_user_id"}`, and the steps of src/storage/erasure.ts
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
import { addHeaders } from "../../shared/schemas.ts";
import type { ErasureParams } from "../../shared/types.ts";
import { beginErasure, eraseArchive, eraseShards, recordErasure, type Erasure } from "../../storage/erasure.ts";
import type { JobShard, StepRunner } from "../../storage/steps.ts";
import { enqueueNotice } from "../events.ts";
import { startParts, waitForParts, type PartOutput } from "./erasure-parts.ts";
import { durableSteps, jobShardsOf } from "./durable.ts";

/** The kind `npm run jobs` shows for an erasure. */
export const ERASURE_JOB = "erasure";

/** The kind `npm run jobs` shows for a part of an erasure. */
export const ERASURE_PART_JOB = "erasure part";

/**
 * The erasure's Workflow, bound as ERASURE in wrangler.toml: an erasure, or a part of one. A
 * step that gives up fails the instance with an error log line (`"event": "job"`) an alert can
 * match; a part that fails fails its erasure, with the part's ID and error.
 */
export class ErasureWorkflow extends WorkflowEntrypoint<ApiEnv, ErasureParams> {
  override async run(event: Readonly<WorkflowEvent<ErasureParams>>, step: WorkflowStep): Promise<Erasure | PartOutput> {
    const part = event.payload?.part;
    try {
      const appUserId = addHeaders.shape.app_user_id.safeParse(event.payload?.app_user_id);
      if (!appUserId.success) throw new NonRetryableError("app_user_id is not one that add accepts");
      const steps = durableSteps(step);
      const shards = jobShardsOf(this.env);
      const { auditHashKey } = apiConfig(this.env);
      if (part) return { shards: await eraseShards(appUserId.data, part, shardsNamed(shards, part.shards), auditHashKey, steps) };
      return await this.erase(event.instanceId, appUserId.data, shards, step, steps);
    } catch (error) {
      logLine("error", "job", { job: part ? ERASURE_PART_JOB : ERASURE_JOB, instance_id: event.instanceId, outcome: "failed", cause: describeError(error) });
      throw error;
    }
  }

  // The erasure itself: `begin`, its parts, then, once every shard is erased, `record and send`.
  // Work on the app user's data outside the shards belongs between the two, after the parts.
  private async erase(id: string, appUserId: string, shards: readonly JobShard[], step: WorkflowStep, steps: StepRunner): Promise<Erasure> {
    const first = shards[0];
    if (!first) throw new NonRetryableError("no shards to erase from");
    const { auditHashKey, erasurePartShards } = apiConfig(this.env);
    const start = await beginErasure(first, steps);
    const parts = await startParts(this.env.ERASURE, step, id, appUserId, start, shards, erasurePartShards);
    const outputs = await waitForParts(this.env.ERASURE, step, parts);
    const perShard: PartOutput["shards"] = Object.assign({}, ...outputs.map((output) => output.shards));
    await eraseArchive(appUserId, start, perShard, shards, auditHashKey, this.env.ARCHIVE, steps);
    return recordErasure(appUserId, start, perShard, first, auditHashKey, { steps, send: (erased) => enqueueNotice(this.env, erased) });
  }
}

// A part names its shards; one this deployment no longer binds cannot be erased by retrying.
function shardsNamed(shards: readonly JobShard[], names: readonly string[]): JobShard[] {
  return names.map((name) => {
    const shard = shards.find((candidate) => candidate.name === name);
    if (!shard) throw new NonRetryableError(`shard ${name} is not bound to this Worker`);
    return shard;
  });
}
