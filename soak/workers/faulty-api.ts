/**
 * The soak's API Worker: the deployed API Worker with its D1 shards and its queue wrapped by the
 * fault injector, and paths of its own through which the harness sets the faults and runs
 * erasures. Its erasure Workflow is the deployed one run on the wrapped bindings, so the faults
 * strike inside its steps. Never deployed: soak/runtime.ts bundles it and gives it the API
 * Worker's bindings.
 */
import { WorkflowEntrypoint, type WorkflowEvent, type WorkflowStep } from "cloudflare:workers";
import type { ApiEnv } from "../../src/shared/env.ts";
import type { ErasureParams, SweepMessage } from "../../src/shared/types.ts";
import { ERASE_PATH, FAULTS_PATH } from "../protocol.ts";
import { deployedModule, deployedWorker } from "./deployed.ts";
import { FaultInjector } from "./fault-injector.ts";

const faults = new FaultInjector();
const api = deployedWorker<ApiEnv, SweepMessage>();

export default {
  async fetch(request, env, ctx): Promise<Response> {
    const { pathname, searchParams } = new URL(request.url);
    if (pathname === FAULTS_PATH) return faults.control(request);
    if (pathname === ERASE_PATH) return erasure(request, env, searchParams.get("id"));
    return (await api).fetch!(request, faults.wrap(env), ctx);
  },
  async scheduled(controller, env, ctx): Promise<void> {
    await (await api).scheduled!(controller, faults.wrap(env), ctx);
  },
  // The cron's sweeps arrive here from the tick, over the SWEEPS queue.
  async queue(batch, env, ctx): Promise<void> {
    await (await api).queue!(batch, faults.wrap(env), ctx);
  },
} satisfies ExportedHandler<ApiEnv, SweepMessage>;

type ErasureClass = new (ctx: ExecutionContext, env: ApiEnv) => { run(event: WorkflowEvent<ErasureParams>, step: WorkflowStep): Promise<unknown> };

/** The deployed erasure Workflow, run on the wrapped bindings. */
export class ErasureWorkflow extends WorkflowEntrypoint<ApiEnv, ErasureParams> {
  override async run(event: Readonly<WorkflowEvent<ErasureParams>>, step: WorkflowStep): Promise<unknown> {
    const { ErasureWorkflow: Deployed } = await deployedModule<{ ErasureWorkflow: ErasureClass }>();
    return new Deployed(this.ctx, faults.wrap(this.env)).run(event, step);
  }
}

async function erasure(request: Request, env: ApiEnv, id: string | null): Promise<Response> {
  if (request.method === "POST") {
    const instance = await env.ERASURE.create({ params: (await request.json()) as ErasureParams });
    return Response.json({ id: instance.id });
  }
  return Response.json(await (await env.ERASURE.get(id ?? "")).status());
}
