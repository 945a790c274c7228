/**
 * The shopper's rights through the app (docs/api.md#jobs): the app push service's client starts an
 * export of an app user's data or their erasure, follows the job, and fetches the export's file.
 * Only the client that started a job reads it; a job's state never names the app user.
 */
import type { AppUserErasedEvent } from "../../shared/schemas.ts";
import type { JobState } from "../../shared/schemas.ts";
import { jobById, startJob, type AppUserJob, type AppUserJobKind } from "../../storage/app-user-jobs.ts";
import { exportPrefix, type ExportSummary } from "../../storage/export.ts";
import type { ApiContext } from "../context.ts";
import type { RouteContext } from "../context.ts";
import { REFUSALS, refuse } from "../refusals.ts";
import { jsonResponse } from "../responses.ts";
import { userKeyOf } from "../user-key.ts";
import { jobShardsOf, startOnce } from "../workflows/durable.ts";

/**
 * POST /receipts/v2/app-users/export and /erase: records the job and its request on the first
 * shard (one batch: the request only while the client's Idempotency-Key is new), starts its
 * Workflow instance under the job's ID unless it runs already, and answers 202 with its state.
 * The same key again answers the same job; with another app user or kind of job, 409.
 */
export function startAppUserJob(kind: AppUserJobKind) {
  return async (c: RouteContext<"exportAppUser" | "eraseAppUser">): Promise<Response> => {
    const { headers, client } = c.var;
    const job: AppUserJob = {
      job_id: crypto.randomUUID(),
      kind,
      client_id: client.client_id,
      idempotency_key: headers["Idempotency-Key"],
      user_key: await userKeyOf(c.get("isolate"), c.get("config"), headers.app_user_id),
      created_at: new Date().toISOString(),
    };
    const [, , [held]] = (await firstShard(c).run(startJob(job, headers.app_user_id))) as [unknown[], unknown[], AppUserJob[]];
    if (!held || held.kind !== kind || held.user_key !== job.user_key) throw refuse(REFUSALS.jobConflict, "Idempotency-Key names another job");
    await startOnce(workflowOf(c, kind), held.job_id, { request_id: held.job_id });
    const { job_id, state } = await stateOf(c, held);
    return jsonResponse({ data: { job_id, kind, state }, status: "Accepted", status_code: 202 }, 202);
  };
}

/** GET /receipts/v2/jobs/{job_id}: the job's state, kind and, once complete, its instant and counts. */
export async function jobState(c: RouteContext<"job">): Promise<Response> {
  const job = await ownJob(c);
  return jsonResponse({ data: await stateOf(c, job), status: "OK", status_code: 200 }, 200);
}

/**
 * GET /receipts/v2/jobs/{job_id}/export: a complete export's file, NDJSON, one receipt or audit
 * record a line, then its summary line, read chunk by chunk from the archive's bucket.
 */
export async function jobExport(c: RouteContext<"jobExport">): Promise<Response> {
  const job = await ownJob(c);
  if (job.kind !== "export" || (await stateOf(c, job)).state !== "complete") throw refuse(REFUSALS.exportNotComplete, "export not complete");
  const chunks = await chunkKeys(c.env.ARCHIVE, job.job_id);
  // Its chunks went with an erasure of the user, or its record outlived them by moments.
  if (chunks.length === 0) throw refuse(REFUSALS.noJob, "export file gone");
  const bucket = c.env.ARCHIVE;
  const body = new ReadableStream<Uint8Array>({
    async pull(controller) {
      const key = chunks.shift();
      if (key === undefined) return controller.close();
      const object = await bucket.get(key);
      if (object) controller.enqueue(new Uint8Array(await object.arrayBuffer()));
    },
  });
  return new Response(body, { status: 200, headers: { "content-type": "application/x-ndjson; charset=utf-8" } });
}

// The job the path names, if the client that asks started it: another client's is as unknown.
async function ownJob(c: RouteContext<"job" | "jobExport">): Promise<AppUserJob> {
  const { client } = c.var;
  const jobId = c.req.param("job_id") ?? "";
  const [[job]] = (await firstShard(c).run([jobById(jobId)])) as [AppUserJob[]];
  if (!job || job.client_id !== client.client_id) throw refuse(REFUSALS.noJob, "no such job of this client");
  return job;
}

function firstShard(c: ApiContext) {
  return jobShardsOf(c.env)[0]!;
}

function workflowOf(c: ApiContext, kind: AppUserJobKind): Workflow<{ request_id: string }> {
  return kind === "export" ? c.env.EXPORT : c.env.ERASURE;
}

/** A job as the app reads it: its Workflow instance's status, and of its output the counts alone. */
async function stateOf(c: ApiContext, job: AppUserJob): Promise<JobState> {
  const status = await workflowOf(c, job.kind)
    .get(job.job_id)
    .then((instance) => instance.status())
    .catch(() => undefined);
  const base = { job_id: job.job_id, kind: job.kind };
  if (!status || status.status === "errored" || status.status === "terminated" || status.status === "unknown") return { ...base, state: "failed" };
  if (status.status !== "complete") return { ...base, state: "running" };
  if (job.kind === "export") {
    const { occurred_at, receipts, archived_receipts, audit_records, by_chain, archive_read } = status.output as ExportSummary;
    return { ...base, state: "complete", occurred_at, counts: { receipts, archived_receipts, audit_records, by_chain, archive_read } };
  }
  const { receipts_erased, event } = status.output as { receipts_erased: number; event: Omit<AppUserErasedEvent, "app_user_id"> };
  return { ...base, state: "complete", occurred_at: event.occurred_at, counts: { receipts_erased } };
}

// The keys of an export's chunks, in the file's order (R2 lists keys in order).
async function chunkKeys(bucket: R2Bucket, jobId: string): Promise<string[]> {
  const keys: string[] = [];
  for (let cursor: string | undefined; ; ) {
    const listing = await bucket.list({ prefix: exportPrefix(jobId), ...(cursor && { cursor }) });
    keys.push(...listing.objects.map(({ key }) => key));
    if (!listing.truncated) return keys;
    cursor = listing.cursor;
  }
}
