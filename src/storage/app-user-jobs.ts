/**
 * Every statement on `app_user_jobs` and `export_requests` (migration 0021), on the first shard
 * (docs/api.md#jobs, docs/storage.md#app-user-jobs): who started which job for which app user,
 * named by their keyed hash, so that only that client reads it, its Idempotency-Key answers it
 * again, and an erasure finds the user's exports. This file stays free of Workers types.
 */
import { statement, type Statement } from "./statement.ts";

/** What a job does for its app user. */
export type AppUserJobKind = "export" | "erasure";

/** A job's row. */
export interface AppUserJob {
  job_id: string;
  kind: AppUserJobKind;
  client_id: string;
  idempotency_key: string;
  user_key: string;
  created_at: string;
}

/** The client that starts a job from an operator's terminal rather than through the API. */
export const OPERATOR_CLIENT = "operator";

/**
 * Records a job unless the client's Idempotency-Key already names one; the batch's next
 * statement ({@link jobOfKey}) then reads whichever row holds the key, this one or the first.
 */
export function recordJob(job: AppUserJob): Statement {
  return statement(
    `INSERT INTO app_user_jobs (job_id, kind, client_id, idempotency_key, user_key, created_at)
      VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT DO NOTHING`,
    job.job_id,
    job.kind,
    job.client_id,
    job.idempotency_key,
    job.user_key,
    job.created_at,
  );
}

/**
 * The batch that starts a job: its request (the app_user_id its instance reads, under the job's
 * ID) only while the client's key is new, the job's row, and the row the key names, which is this
 * job's unless the key already named one. Rows of the last statement: that {@link AppUserJob}.
 */
export function startJob(job: AppUserJob, appUserId: string): Statement[] {
  const requests = job.kind === "export" ? "export_requests" : "erasure_requests";
  return [
    statement(
      `INSERT INTO ${requests} (request_id, app_user_id, requested_at)
      SELECT ?1, ?2, ?3 WHERE NOT EXISTS (SELECT 1 FROM app_user_jobs WHERE client_id = ?4 AND idempotency_key = ?5)
      ON CONFLICT DO NOTHING`,
      job.job_id,
      appUserId,
      job.created_at,
      job.client_id,
      job.idempotency_key,
    ),
    recordJob(job),
    jobOfKey(job.client_id, job.idempotency_key),
  ];
}

/** The job a client's Idempotency-Key names. Row: an {@link AppUserJob}. */
export function jobOfKey(clientId: string, idempotencyKey: string): Statement {
  return statement("SELECT * FROM app_user_jobs WHERE client_id = ?1 AND idempotency_key = ?2", clientId, idempotencyKey);
}

/** A job by its ID. Row: an {@link AppUserJob}. */
export function jobById(jobId: string): Statement {
  return statement("SELECT * FROM app_user_jobs WHERE job_id = ?1", jobId);
}

/** The app user's exports (their files are to go with an erasure). Rows: `job_id`. */
export function exportsOfUser(userKey: string): Statement {
  return statement("SELECT job_id FROM app_user_jobs WHERE user_key = ?1 AND kind = 'export'", userKey);
}

/** Up to `limit` jobs made before `cutoff`, oldest first, whose files may go. Rows: `job_id`, `kind`. */
export function jobsMadeBefore(cutoff: string, limit: number): Statement {
  return statement("SELECT job_id, kind FROM app_user_jobs WHERE created_at < ?1 ORDER BY created_at LIMIT ?2", cutoff, limit);
}

/** Forgets the jobs named (their files gone). */
export function forgetJobs(jobIds: readonly string[]): Statement {
  return statement("DELETE FROM app_user_jobs WHERE job_id IN (SELECT value FROM json_each(?1))", JSON.stringify(jobIds));
}

/** The request `requestId` to export `appUserId`, made at `at`; written again, it changes nothing. */
export function recordExportRequest(requestId: string, appUserId: string, at: Date): Statement {
  return statement(
    "INSERT INTO export_requests (request_id, app_user_id, requested_at) VALUES (?1, ?2, ?3) ON CONFLICT DO NOTHING",
    requestId,
    appUserId,
    at.toISOString(),
  );
}

/** The app_user_id of an export's request. Row: `app_user_id`; none once the export is done with it. */
export function readExportRequest(requestId: string): Statement {
  return statement("SELECT app_user_id FROM export_requests WHERE request_id = ?1", requestId);
}

/** The export's request is done with. */
export function forgetExportRequest(requestId: string): Statement {
  return statement("DELETE FROM export_requests WHERE request_id = ?1", requestId);
}

/** Every export request of the app user: an erasure takes them, so no export of theirs starts after it. */
export function forgetExportRequestsOf(appUserId: string): Statement {
  return statement("DELETE FROM export_requests WHERE app_user_id = ?1", appUserId);
}
