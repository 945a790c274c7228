/** Entry of the API Worker. */
import type { ApiEnv } from "../shared/env.ts";
import { createApp } from "./app.ts";
import { runScheduledJobs } from "./scheduled.ts";

const app = createApp();

export default {
  fetch: app.fetch,
  async scheduled(controller, env, ctx) {
    ctx.waitUntil(runScheduledJobs(env, new Date(controller.scheduledTime)));
  },
} satisfies ExportedHandler<ApiEnv>;
