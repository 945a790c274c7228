/**
 * The erasure of an app user as a Cloudflare Workflow (docs/api.md#erasure): `npm run app-users
 * -- erase` starts an instance with `{"app_user_id"}`, and the steps of src/storage/erasure.ts
 * run as durable steps, one D1 batch each, so that no invocation nears D1's 1,000 queries
 * whatever the number of shards, nothing waits on the operator's machine, and an instance cut
 * off anywhere resumes where it stopped with the same end state. Its output is what the erasure
 * did (`Erasure`).
 */
import { NonRetryableError } from "cloudflare:workflows";
import { WorkflowEntrypoint, type WorkflowEvent, type WorkflowStep } from "cloudflare:workers";
import { apiConfig } from "../../shared/config.ts";
import type { ApiEnv } from "../../shared/env.ts";
import { describeError, logLine } from "../../shared/log.ts";
import { addHeaders } from "../../shared/schemas.ts";
import { eraseAppUser, type Erasure, type StepRunner } from "../../storage/erasure.ts";
import { shardsOf } from "../../storage/shards.ts";
import { runBatch } from "../../storage/statement.ts";
import { enqueueNotice } from "../events.ts";
import { STEP_CONFIG } from "./step-config.ts";

/** What starts an erasure. */
export interface ErasureParams {
  app_user_id: string;
}

/** The kind `npm run jobs` shows for an instance of this Workflow. */
export const ERASURE_JOB = "erasure";

/**
 * The erasure's Workflow, bound as ERASURE in wrangler.toml. A step that gives up fails the
 * instance with an error log line (`"event": "job"`) an alert can match.
 */
export class ErasureWorkflow extends WorkflowEntrypoint<ApiEnv, ErasureParams> {
  override async run(event: Readonly<WorkflowEvent<ErasureParams>>, step: WorkflowStep): Promise<Erasure> {
    const appUserId = addHeaders.shape.app_user_id.safeParse(event.payload?.app_user_id);
    if (!appUserId.success) throw new NonRetryableError("app_user_id is not one that add accepts");
    const shards = shardsOf(this.env).map((shard) => ({
      ...shard,
      run: async (statements: Parameters<typeof runBatch>[1]) => (await runBatch(shard.db, statements)).map(({ results }) => results),
    }));
    const steps: StepRunner = (name, work) => step.do(name, STEP_CONFIG, work as () => Promise<never>);
    try {
      return await eraseAppUser(appUserId.data, shards, apiConfig(this.env).auditHashKey, {
        steps,
        send: (erased, shard) => enqueueNotice(this.env, erased),
        archive: this.env.ARCHIVE,
      });
    } catch (error) {
      logLine("error", "job", { job: ERASURE_JOB, instance_id: event.instanceId, outcome: "failed", cause: describeError(error) });
      throw error;
    }
  }
}
