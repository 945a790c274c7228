/**
 * The export of an app user's data as a Cloudflare Workflow (docs/api.md#export): started by
 * POST /receipts/v2/app-users/export or `npm run app-users -- export`, with `{"request_id"}`,
 * never the app_user_id, which each step reads from export_requests on the first shard. Its steps
 * are src/storage/export.ts's, each bounded in shards, rows and bytes, so that an export of a user
 * with 100,000 receipts over 5,000 shards stays within every per-invocation limit and the 1,024
 * steps of an instance (docs/scale.md). Its output is the export's summary, which names no user.
 */
import { NonRetryableError } from "cloudflare:workflows";
import { WorkflowEntrypoint, type WorkflowEvent, type WorkflowStep } from "cloudflare:workers";
import { apiConfig } from "../../shared/config.ts";
import type { ApiEnv } from "../../shared/env.ts";
import { describeError, logLine } from "../../shared/log.ts";
import { forgetExportRequest, readExportRequest } from "../../storage/app-user-jobs.ts";
import { ExportErased, exportAppUser, type ExportSummary } from "../../storage/export.ts";
import { jobShardsOf, requestedJob } from "./durable.ts";

/** The kind `npm run jobs` and GET /receipts/v2/jobs/{job_id} show for an export. */
export const EXPORT_JOB = "export";

/** An export's params: its request on the first shard, whose ID is the job's. */
export interface ExportParams {
  request_id: string;
}

/**
 * The export's Workflow, bound as EXPORT in wrangler.jsonc. It holds the app user on every shard,
 * fixes its instant, waits until every add made before it has committed (FEED_SETTLE_SECONDS,
 * as the event feed waits), reads, writes its file, releases its holds and forgets its request.
 */
export class ExportWorkflow extends WorkflowEntrypoint<ApiEnv, ExportParams> {
  override async run(event: Readonly<WorkflowEvent<ExportParams>>, step: WorkflowStep): Promise<ExportSummary> {
    try {
      const shards = jobShardsOf(this.env);
      const requestId = event.payload?.request_id;
      const { appUserId, steps } = await requestedJob(step, shards, requestId, readExportRequest);
      const { auditHashKey, feedSettleMs } = apiConfig(this.env);
      // A wait inside a step rather than a Workflow's sleep: a few seconds, and a local sleep
      // (wrangler dev) was seen never to wake. A replay finds the step done and waits no more.
      const settle = (instant: number) =>
        steps("settle", async () => {
          await new Promise((resolve) => setTimeout(resolve, Math.max(0, instant + feedSettleMs - Date.now())));
          return true;
        }).then(() => undefined);
      const summary = await exportAppUser({ id: appUserId, job_id: event.instanceId }, shards, auditHashKey, this.env.ARCHIVE, { steps, settle });
      await steps("forget the request", async () => {
        await shards[0]!.run([forgetExportRequest(requestId as string)]);
        return true;
      });
      return summary;
    } catch (error) {
      logLine("error", "job", { job: EXPORT_JOB, instance_id: event.instanceId, outcome: "failed", cause: describeError(error) });
      if (error instanceof ExportErased) throw new NonRetryableError(error.message);
      throw error;
    }
  }
}
