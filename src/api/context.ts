import type { Context } from "hono";
import type { ApiEnv } from "../shared/env.ts";
import type { ApiConfig } from "./config.ts";

/** What the request-log middleware and the routes share about one request. */
export interface RequestVariables {
  requestId: string;
  /** The checked settings; read before any route runs, so a bad setting fails every request. */
  config: ApiConfig;
  /** The caller's client_id once a route has read it, for the log line. */
  clientId?: string;
}

/** Hono's generic argument for the API Worker. */
export interface ApiBindings {
  Bindings: ApiEnv;
  Variables: RequestVariables;
}

export type ApiContext = Context<ApiBindings>;
