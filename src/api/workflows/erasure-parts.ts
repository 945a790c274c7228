/**
 * The parts of an erasure (docs/scale.md §6): its shards in groups, each erased by a child
 * instance of the erasure's Workflow, so that no instance runs more steps than Workflows allow
 * however many shards there are. The erasure starts one step a part, then checks on them all in
 * steps of their own, sleeping between checks, until every part completed or one failed.
 */
import type { WorkflowStep, WorkflowStepConfig } from "cloudflare:workers";
import { erasurePartId } from "../../shared/job-ids.ts";
import type { ErasureParams } from "../../shared/types.ts";
import type { ErasureStart } from "../../storage/erasure.ts";
import { startOnce } from "./durable.ts";

/** What a part returns: the receipts it erased per shard name. */
export interface PartOutput {
  shards: Record<string, number>;
}

// Starting a part is one call; checking waits inside the step for up to CHECK_WINDOW_MS, so a
// part that ends within it costs no sleep.
const START_CONFIG: WorkflowStepConfig = { retries: { limit: 5, delay: "2 seconds", backoff: "exponential" }, timeout: "1 minute" };
const CHECK_CONFIG: WorkflowStepConfig = { retries: { limit: 5, delay: "2 seconds", backoff: "exponential" }, timeout: "2 minutes" };
const CHECK_WINDOW_MS = 30_000;
// Sleeps between checks double up to 5 minutes: a day of waiting takes about 300 checks, well
// within the steps an instance may run, and a sleep takes none of them.
const LONGEST_SLEEP_S = 300;

/**
 * Starts a part for each group of at most `perPart` shards, in the shards' order, one step each
 * (`start part <n>`), and returns their instance IDs. A step run again finds the part it started.
 */
export async function startParts(
  workflow: Workflow<ErasureParams>,
  step: WorkflowStep,
  erasureId: string,
  requestId: string,
  start: ErasureStart,
  shards: readonly { name: string }[],
  perPart: number,
): Promise<string[]> {
  const ids: string[] = [];
  for (let index = 0; index * perPart < shards.length; index += 1) {
    const id = erasurePartId(erasureId, start.event_id, index);
    const part = { ...start, shards: shards.slice(index * perPart, (index + 1) * perPart).map((shard) => shard.name) };
    await step.do(`start part ${index}`, START_CONFIG, async () => {
      await startOnce(workflow, id, { request_id: requestId, part });
      return id;
    });
    ids.push(id);
  }
  return ids;
}

/**
 * Waits for every part to complete (`check parts <n>` steps, with `sleep <n>` between them) and
 * returns their outputs in the order of `ids`. A part that errored or was terminated fails the
 * erasure, naming the part: its shards keep what it did not reach, and nothing is recorded.
 */
export async function waitForParts(workflow: Workflow<ErasureParams>, step: WorkflowStep, ids: readonly string[]): Promise<PartOutput[]> {
  for (let round = 0; ; round += 1) {
    const check = await step.do(`check parts ${round}`, CHECK_CONFIG, () => partsWhenDone(workflow, ids));
    // Thrown outside any step, where nothing retries it: the instance's error is then this one,
    // where a NonRetryableError would show as the runtime's own message.
    if (check && "failed" in check) throw new ErasurePartFailed(check.failed);
    if (check) return check.outputs;
    await step.sleep(`sleep ${round}`, `${Math.min(2 ** round, LONGEST_SLEEP_S)} seconds`);
  }
}

/** A part of an erasure errored or was terminated: its erasure fails with this error. */
export class ErasurePartFailed extends Error {
  override name = "ErasurePartFailed";
}

// The parts' outputs once all completed, the first failed part, or null if some still run at the
// end of the window.
async function partsWhenDone(
  workflow: Workflow<ErasureParams>,
  ids: readonly string[],
): Promise<{ outputs: PartOutput[] } | { failed: string } | null> {
  const deadline = Date.now() + CHECK_WINDOW_MS;
  for (let pauseMs = 50; ; pauseMs = Math.min(pauseMs * 2, 2_000)) {
    const statuses = await Promise.all(ids.map(async (id) => (await workflow.get(id)).status()));
    const failed = statuses.findIndex(({ status }) => status === "errored" || status === "terminated");
    if (failed !== -1) {
      const { status, error } = statuses[failed]!;
      return { failed: `erasure part ${ids[failed]} ${status}${error ? `: ${error.name}: ${error.message}` : ""}` };
    }
    if (statuses.every(({ status }) => status === "complete")) return { outputs: statuses.map(({ output }) => output as PartOutput) };
    if (Date.now() >= deadline) return null;
    await new Promise((resolve) => setTimeout(resolve, pauseMs));
  }
}
