/** Entry of the API Worker. */
import { createApp } from "./app.ts";
import type { ApiEnv } from "../shared/env.ts";

const app = createApp();

export default {
  fetch: app.fetch,
} satisfies ExportedHandler<ApiEnv>;
