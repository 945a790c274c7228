/** Entry of the API Worker. */
import { apiConfig } from "../shared/config.ts";
import type { ApiEnv } from "../shared/env.ts";
import { describeError, logLine } from "../shared/log.ts";
import { createApp } from "./app.ts";
import { newIsolateState } from "./context.ts";
import type { SweepMessage } from "../shared/types.ts";
import { consumeSweeps, dispatchSweeps, startDailyArchives, startsArchives } from "./scheduled.ts";

export { ArchiveWorkflow } from "./workflows/archive-workflow.ts";
export { ErasureWorkflow } from "./workflows/erasure-workflow.ts";
export { ExportWorkflow } from "./workflows/export-workflow.ts";

// One isolate serves many requests and cron ticks; what it remembers between them lives here.
const isolate = newIsolateState();
const app = createApp(isolate);

export default {
  fetch: app.fetch,
  // The tick only hands the shards out; the SWEEPS queue's consumer, below, sweeps them. Once a
  // day it also starts the archive's moves, which run as Workflow instances of their own.
  async scheduled(controller, env, ctx) {
    const now = new Date(controller.scheduledTime);
    if (startsArchives(now)) ctx.waitUntil(startDailyArchives(env, now));
    ctx.waitUntil(
      dispatchSweeps(env, now).catch((error: unknown) => {
        // No shard is swept this minute; the next tick sends them all again.
        logLine("error", "scheduled", { job: "sweeps.dispatch", cause: describeError(error) });
      }),
    );
  },
  async queue(batch, env) {
    await consumeSweeps(batch.messages, env, apiConfig(env, isolate.settings));
  },
} satisfies ExportedHandler<ApiEnv, SweepMessage>;
