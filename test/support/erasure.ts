/** The erasure's Workflow as `npm run app-users -- erase` starts it, driven to its end by the vitest plugin. */
import { env } from "cloudflare:workers";
import { introspectWorkflowInstance, type WorkflowInstanceModifier } from "cloudflare:test";
import type { Erasure } from "../../src/storage/erasure.ts";
import { uniqueId } from "./api.ts";

/** Runs the erasure's Workflow for one app user to its end and returns its output. */
export async function erase(appUserId: string, modify?: (m: WorkflowInstanceModifier) => Promise<void>): Promise<Erasure> {
  const id = uniqueId("erasure");
  await using instance = await introspectWorkflowInstance(env.ERASURE, id);
  await instance.modify(async (m) => {
    await m.disableRetryDelays();
    await modify?.(m);
  });
  await env.ERASURE.create({ id, params: { app_user_id: appUserId } });
  await instance.waitForStatus("complete");
  return (await instance.getOutput()) as Erasure;
}
