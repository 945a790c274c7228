/** How the service's Workflows run a step. */
import type { WorkflowStepConfig } from "cloudflare:workers";

/**
 * A step is one short D1 transaction (and, for the archive, a page's R2 writes); a failing shard
 * or bucket gets a few minutes to come back before the instance gives up (an operator restarts
 * it: docs/operations.md).
 */
export const STEP_CONFIG: WorkflowStepConfig = {
  retries: { limit: 5, delay: "2 seconds", backoff: "exponential" },
  timeout: "2 minutes",
};
