/**
 * The soak's API Worker: the deployed API Worker with its D1 shards and its queue wrapped by the
 * fault injector, and a path of its own through which the harness sets the faults. Never deployed:
 * soak/runtime.ts bundles it and gives it the API Worker's bindings.
 */
import type { ApiEnv } from "../../src/shared/env.ts";
import type { SweepMessage } from "../../src/shared/types.ts";
import { FAULTS_PATH } from "../protocol.ts";
import { deployedWorker } from "./deployed.ts";
import { FaultInjector } from "./fault-injector.ts";

const faults = new FaultInjector();
const api = deployedWorker<ApiEnv, SweepMessage>();

export default {
  async fetch(request, env, ctx): Promise<Response> {
    if (new URL(request.url).pathname === FAULTS_PATH) return faults.control(request);
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
