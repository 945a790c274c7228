/**
 * How the service's Workflows run: their steps' retries, the shards as their steps take them, and
 * starting an instance under an ID that a re-run of the same step, or another tick, may have taken.
 */
import { NonRetryableError } from "cloudflare:workflows";
import type { WorkflowStep, WorkflowStepConfig } from "cloudflare:workers";
import { addHeaders } from "../../shared/schemas.ts";
import { shardsOf } from "../../storage/shards.ts";
import { runBatch, type Statement } from "../../storage/statement.ts";
import type { JobShard, StepRunner } from "../../storage/steps.ts";

/**
 * A step is one short D1 transaction (and, for the archive, a page's R2 writes); a failing shard
 * or bucket gets a few minutes to come back before the instance gives up (an operator restarts
 * it: docs/operations.md).
 */
export const STEP_CONFIG: WorkflowStepConfig = {
  retries: { limit: 5, delay: "2 seconds", backoff: "exponential" },
  timeout: "2 minutes",
};

/** A job's named steps as durable steps of this instance. */
export function durableSteps(step: WorkflowStep): StepRunner {
  return (name, work) => step.do(name, STEP_CONFIG, work as () => Promise<never>);
}

/** The Worker's shards as a job takes them: each runs its statements as one D1 batch. */
export function jobShardsOf(env: object): JobShard[] {
  return shardsOf(env).map((shard) => ({
    ...shard,
    run: async (statements) => (await runBatch(shard.db, statements)).map(({ results }) => results),
  }));
}

/**
 * Starts an instance under `id` unless one has it already; returns whether this call started it.
 * A failed create whose ID exists is that instance, started before (by an earlier run of the same
 * step, or an earlier tick); any other failure is thrown.
 */
export async function startOnce<P>(workflow: Workflow<P>, id: string, params: P): Promise<boolean> {
  try {
    await workflow.create({ id, params });
    return true;
  } catch (error) {
    if (await exists(workflow, id)) return false;
    throw error;
  }
}

async function exists<P>(workflow: Workflow<P>, id: string): Promise<boolean> {
  try {
    await workflow.get(id);
    return true;
  } catch {
    return false;
  }
}

/**
 * The app user a job's request names (erasure_requests, export_requests on the first shard, read
 * by `read`), and the steps the job runs with: durable ones; or, once the request is gone, steps
 * that return what ran before from storage and fail the instance on one that would run now (an
 * instance replayed after its last step needs no ID; one that would work without it cannot).
 * An instance's params name the request alone: a Workflow keeps them where no erasure reaches.
 */
export async function requestedJob(
  step: WorkflowStep,
  shards: readonly JobShard[],
  requestId: unknown,
  read: (requestId: string) => Statement,
): Promise<{ appUserId: string; steps: StepRunner }> {
  if (typeof requestId !== "string" || requestId.length > REQUEST_ID_CHARS) throw new NonRetryableError("request_id is not a job's request");
  const first = shards[0];
  if (!first) throw new NonRetryableError("no shards to work on");
  const [rows] = (await first.run([read(requestId)])) as [{ app_user_id: string }[]];
  const requested = rows[0]?.app_user_id;
  const steps: StepRunner =
    requested === undefined
      ? (name) =>
          step.do(name, STEP_CONFIG, async () => {
            throw new NonRetryableError("the job's request is gone: start the job again");
          })
      : durableSteps(step);
  const appUserId = addHeaders.shape.app_user_id.safeParse(requested ?? UNREQUESTED);
  if (!appUserId.success) throw new NonRetryableError("app_user_id is not one that add accepts");
  return { appUserId: appUserId.data, steps };
}

// Request IDs are UUIDs; anything much longer was never made by a request.
const REQUEST_ID_CHARS = 100;

// Stands for the app user of a request that is gone: an ID add accepts, never used by a step.
const UNREQUESTED = "request-gone";
