/**
 * The soak's API Worker: the deployed API Worker with its D1 shards, its queue and its bucket wrapped by the
 * fault injector, and paths of its own through which the harness sets the faults and runs
 * erasures and archive moves, and holds their steps at a gate (step-gate.ts). Its Workflows (the erasure, the archive's move) are the deployed ones run on the
 * wrapped bindings, so the faults strike inside their steps. Never deployed: soak/runtime.ts bundles it and gives it the API
 * Worker's bindings.
 */
import { WorkflowEntrypoint, type WorkflowEvent, type WorkflowStep } from "cloudflare:workers";
import type { ArchiveParams } from "../../src/api/workflows/archive-workflow.ts";
import type { ExportParams } from "../../src/api/workflows/export-workflow.ts";
import type { ApiEnv } from "../../src/shared/env.ts";
import type { ErasureParams, SweepMessage } from "../../src/shared/types.ts";
import { recordErasureRequest } from "../../src/storage/erasure-requests.ts";
import { shardsOf } from "../../src/storage/shards.ts";
import { bound, runBatch, type Statement } from "../../src/storage/statement.ts";
import { ARCHIVE_PATH, ERASE_PATH, FAULTS_PATH, SPAN_PATH, SQL_PATH, STEPS_PATH, type SqlResult } from "../protocol.ts";
import { deployedModule, deployedWorker } from "./deployed.ts";
import { FaultInjector } from "./fault-injector.ts";
import { StepGate } from "./step-gate.ts";

const faults = new FaultInjector();
const gate = new StepGate();
const api = deployedWorker<ApiEnv, SweepMessage>();

export default {
  async fetch(request, env, ctx): Promise<Response> {
    const { pathname, searchParams } = new URL(request.url);
    if (pathname === FAULTS_PATH) return faults.control(request);
    if (pathname === STEPS_PATH) return gate.control(request);
    if (pathname === ERASE_PATH && request.method === "POST") return startErasure(env, request);
    if (pathname === ERASE_PATH) return job(env.ERASURE, request, searchParams.get("id"));
    if (pathname === ARCHIVE_PATH) return job(env.ARCHIVING, request, searchParams.get("id"));
    if (pathname === SQL_PATH) return runSql(env, request);
    if (pathname === SPAN_PATH) return Response.json({ found: (await env.ARCHIVE.head(((await request.json()) as { value: string }).value)) !== null });
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

type WorkflowClass<Params> = new (ctx: ExecutionContext, env: ApiEnv) => { run(event: WorkflowEvent<Params>, step: WorkflowStep): Promise<unknown> };

/** The deployed Workflow class exported as `name`, run on the wrapped bindings. */
function onWrappedBindings<Params>(name: "ErasureWorkflow" | "ArchiveWorkflow" | "ExportWorkflow") {
  return class extends WorkflowEntrypoint<ApiEnv, Params> {
    override async run(event: Readonly<WorkflowEvent<Params>>, step: WorkflowStep): Promise<unknown> {
      const { [name]: Deployed } = await deployedModule<Record<typeof name, WorkflowClass<Params>>>();
      return new Deployed(this.ctx, faults.wrap(this.env)).run(event, gate.wrap(step, event.instanceId));
    }
  };
}

/** The deployed erasure Workflow, run on the wrapped bindings. */
export const ErasureWorkflow = onWrappedBindings<ErasureParams>("ErasureWorkflow");
/** The deployed archive Workflow, run on the wrapped bindings. */
export const ArchiveWorkflow = onWrappedBindings<ArchiveParams>("ArchiveWorkflow");
/** The deployed export Workflow, run on the wrapped bindings. */
export const ExportWorkflow = onWrappedBindings<ExportParams>("ExportWorkflow");

// Starts an erasure of the POSTed app_user_id as the operator's command does: its request on the
// first shard, then an instance that names the request alone.
async function startErasure(env: ApiEnv, request: Request): Promise<Response> {
  const { app_user_id } = (await request.json()) as { app_user_id: string };
  const [first] = shardsOf(env);
  const requestId = crypto.randomUUID();
  await bound(first!.db, recordErasureRequest(requestId, app_user_id, new Date())).run();
  const instance = await env.ERASURE.create({ params: { request_id: requestId } });
  return Response.json({ id: instance.id });
}

// Starts an instance of the Workflow with the POSTed params, or answers one's status.
async function job<Params>(workflow: Workflow<Params>, request: Request, id: string | null): Promise<Response> {
  if (request.method === "POST") {
    const instance = await workflow.create({ params: (await request.json()) as Params });
    return Response.json({ id: instance.id });
  }
  return Response.json(await (await workflow.get(id ?? "")).status());
}

// Runs the POSTed statements as one batch on the named shard, as deployed: the harness's reads
// and an operator's replays must not meet the faults.
async function runSql(env: ApiEnv, request: Request): Promise<Response> {
  const { binding, statements } = (await request.json()) as { binding: string; statements: Statement[] };
  const shard = shardsOf(env).find((each) => each.binding === binding);
  if (!shard) return new Response(`no shard bound as ${binding}`, { status: 404 });
  const results = await runBatch(shard.db, statements);
  const answer: SqlResult[] = results.map(({ results: rows, meta }) => ({ results: rows as Record<string, unknown>[], changes: meta.changes }));
  // Bytes as arrays of numbers, which JSON keeps.
  return new Response(JSON.stringify(answer, (_key, value: unknown) => (value instanceof ArrayBuffer ? [...new Uint8Array(value)] : value)), {
    headers: { "content-type": "application/json" },
  });
}
