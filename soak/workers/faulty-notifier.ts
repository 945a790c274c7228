/**
 * The soak's notifier: the deployed notifier with its D1 shards wrapped by the fault injector, and
 * a fetch handler through which the harness sets the faults. Never deployed: soak/runtime.ts
 * bundles it and gives it the notifier's bindings and queue consumers.
 */
import type { NotifierEnv } from "../../src/shared/env.ts";
import type { NoticeMessage } from "../../src/shared/types.ts";
import { deployedWorker } from "./deployed.ts";
import { FaultInjector } from "./fault-injector.ts";

const faults = new FaultInjector();
const notifier = deployedWorker<NotifierEnv, NoticeMessage>();

export default {
  fetch: (request) => faults.control(request),
  async queue(batch, env, ctx): Promise<void> {
    await (await notifier).queue!(batch, faults.wrap(env), ctx);
  },
} satisfies ExportedHandler<NotifierEnv, NoticeMessage>;
