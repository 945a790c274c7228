/** The erasure's Workflow as `npm run app-users -- erase` starts it, driven to its end by the vitest plugin. */
import { startErasure } from "../../src/api/workflows/erasure-workflow.ts";
import { env } from "cloudflare:workers";
import { introspectWorkflow, introspectWorkflowInstance, type WorkflowInstanceModifier } from "cloudflare:test";
import type { Erasure } from "../../src/storage/erasure.ts";
import { uniqueId } from "./api.ts";

/**
 * Runs the erasure's Workflow for one app user to its end and returns its output; `modifyAll`
 * changes every instance started meanwhile, the erasure and its parts.
 */
export async function erase(appUserId: string, modifyAll?: (m: WorkflowInstanceModifier) => Promise<void>): Promise<Erasure> {
  const id = uniqueId("erasure");
  await using everyInstance = modifyAll ? await introspectWorkflow(env.ERASURE) : undefined;
  await everyInstance?.modifyAll(async (m) => {
    await m.disableRetryDelays();
    await modifyAll!(m);
  });
  await using instance = await introspectWorkflowInstance(env.ERASURE, id);
  await instance.modify((m) => m.disableRetryDelays());
  await startErasure(env, appUserId, id);
  await instance.waitForStatus("complete");
  return (await instance.getOutput()) as Erasure;
}
