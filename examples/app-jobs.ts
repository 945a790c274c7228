/**
 * The app's backend acting for one shopper (docs/api.md#jobs): a copy of everything the service
 * holds of them (`exportUser`), or their erasure (`forgetUser`), as the app push service's client
 * (scope service.app). Each starts a job with an Idempotency-Key of its own, sent again with the
 * same key after no answer or a 5xx or 429, so that a retry never starts a second job; then polls
 * the job until it ends, and for an export fetches its file.
 *
 *     const { file, job } = await exportUser(source, "user-42");   // NDJSON, its summary line last
 *     const { job } = await forgetUser(source, "user-42");          // job.occurred_at: the erasure's instant
 */
import { setTimeout as sleep } from "node:timers/promises";
import { login, type AppClient } from "./app-feed.ts";

/** A job as GET /receipts/v2/jobs/{job_id} answers it. */
export interface AppUserJob {
  job_id: string;
  kind: "export" | "erasure";
  state: "running" | "complete" | "failed";
  occurred_at?: string;
  counts?: Record<string, unknown>;
}

/** How often a job is polled, how often a start is sent at most, and how long it is followed (no limit by default). */
export interface JobPolling {
  pollMs?: number;
  attempts?: number;
  timeoutMs?: number;
}

const POLL_MS = 1000;
const ATTEMPTS = 5;

/** Exports the app user's data: the complete job, and its file as the service wrote it. */
export async function exportUser(source: AppClient, appUserId: string, polling: JobPolling = {}): Promise<{ job: AppUserJob; file: string }> {
  const session = await open(source);
  const job = await runJob(session, "export", appUserId, polling);
  const response = await fetch(`${source.baseUrl}/receipts/v2/jobs/${encodeURIComponent(job.job_id)}/export`, { headers: session.headers });
  if (!response.ok) throw new Error(`the export's file answered ${response.status}: ${await messageOf(response)}`);
  return { job, file: await response.text() };
}

/**
 * Erases the app user: the complete job, whose `occurred_at` is the erasure's instant. The app then
 * drops what it holds of them created at or before it, as its `app_user.erased` event says too.
 */
export async function forgetUser(source: AppClient, appUserId: string, polling: JobPolling = {}): Promise<{ job: AppUserJob }> {
  return { job: await runJob(await open(source), "erase", appUserId, polling) };
}

interface Session {
  baseUrl: string;
  headers: Record<string, string>;
}

async function open(source: AppClient): Promise<Session> {
  return { baseUrl: source.baseUrl, headers: { Authorization: `Bearer ${await login(source)}`, client_id: source.clientId } };
}

// Starts the job, then polls it until it is no longer running; a failed job is an error.
async function runJob(
  session: Session,
  route: "export" | "erase",
  appUserId: string,
  { pollMs = POLL_MS, attempts = ATTEMPTS, timeoutMs = Number.POSITIVE_INFINITY }: JobPolling,
): Promise<AppUserJob> {
  const deadline = Date.now() + timeoutMs;
  const headers = { ...session.headers, app_user_id: appUserId, "Idempotency-Key": crypto.randomUUID() };
  let started: AppUserJob | undefined;
  for (let attempt = 1; !started; attempt += 1) {
    const response = await fetch(`${session.baseUrl}/receipts/v2/app-users/${route}`, { method: "POST", headers }).catch(() => undefined);
    if (response?.status === 202) started = ((await response.json()) as { data: AppUserJob }).data;
    else if (attempt >= attempts || (response && response.status < 500 && response.status !== 429)) {
      throw new Error(`POST /receipts/v2/app-users/${route} answered ${response ? `${response.status}: ${await messageOf(response)}` : "nothing"}`);
    } else await sleep(retryAfterMs(response) ?? pollMs);
  }
  let job = started;
  while (job.state === "running") {
    if (Date.now() > deadline) throw new Error(`the ${job.kind} job ${job.job_id} is still running after ${timeoutMs} ms`);
    await sleep(pollMs);
    const response = await fetch(`${session.baseUrl}/receipts/v2/jobs/${encodeURIComponent(job.job_id)}`, { headers: session.headers });
    // A poll refused for a moment (429, a 5xx) is polled again; the job runs on regardless.
    if (response.status === 429 || response.status >= 500) continue;
    if (!response.ok) throw new Error(`GET /receipts/v2/jobs/${job.job_id} answered ${response.status}: ${await messageOf(response)}`);
    job = ((await response.json()) as { data: AppUserJob }).data;
  }
  if (job.state === "failed") throw new Error(`the ${job.kind} job ${job.job_id} failed: start it again`);
  return job;
}

function retryAfterMs(response: Response | undefined): number | undefined {
  const seconds = Number(response?.headers.get("retry-after") ?? Number.NaN);
  return Number.isFinite(seconds) ? seconds * 1000 : undefined;
}

async function messageOf(response: Response): Promise<string> {
  const text = await response.text();
  try {
    return (JSON.parse(text) as { message?: string }).message ?? text;
  } catch {
    return text;
  }
}
