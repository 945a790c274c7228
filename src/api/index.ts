/** Entry of the API Worker. */
import { apiConfig } from "../shared/config.ts";
import type { ApiEnv } from "../shared/env.ts";
import { createApp } from "./app.ts";
import { newIsolateState } from "./context.ts";
import { runScheduledJobs } from "./scheduled.ts";

export { ErasureWorkflow } from "./workflows/erasure.ts";

// One isolate serves many requests and cron ticks; what it remembers between them lives here.
const isolate = newIsolateState();
const app = createApp(isolate);

export default {
  fetch: app.fetch,
  async scheduled(controller, env, ctx) {
    const now = new Date(controller.scheduledTime);
    ctx.waitUntil((async () => runScheduledJobs(env, now, apiConfig(env, isolate.settings)))());
  },
} satisfies ExportedHandler<ApiEnv>;
