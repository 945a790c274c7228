/**
 * How the service's Workflows run: their steps' retries, the shards as their steps take them, and
 * starting an instance under an ID that a re-run of the same step, or another tick, may have taken.
 */
import type { WorkflowStep, WorkflowStepConfig } from "cloudflare:workers";
import { shardsOf } from "../../storage/shards.ts";
import { runBatch } from "../../storage/statement.ts";
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
