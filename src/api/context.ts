import type { Context } from "hono";
import type * as z from "zod/mini";
import type { ApiConfig, ApiSettings, SettingsMemory } from "../shared/config.ts";
import type { HealthReport } from "../shared/health-report.ts";
import type { RatePolicy } from "../shared/rate-limits.ts";
import type { ClientRecord } from "../shared/types.ts";
import type { ApiEnv } from "../shared/env.ts";
import { newPlacementMemory, type PlacementMemory } from "../storage/placement.ts";
import type { ShardRead } from "../storage/health.ts";
import type { ROUTES, RouteName, RouteScope } from "./route-table.ts";

/**
 * Everything the API Worker keeps in memory between requests of one isolate, in one place:
 * src/api/index.ts makes one beside the app, and a test that wants a cold isolate makes its own.
 * Token keys imported for signing are kept in src/api/auth/tokens.ts, keyed by the key itself.
 * The shapes of this memory live here, below the modules that fill it (auth/, status/), so that
 * what every route imports depends on none of them.
 */
export interface IsolateState {
  /** The settings, parsed once. */
  settings: SettingsMemory<ApiSettings, ApiConfig>;
  /** Client records read from KV, reused for CLIENT_CACHE_SECONDS. */
  clients: ClientCache;
  /** The shard states, their fill and the failing shards, for placing new receipts. */
  placement: PlacementMemory;
  /** The status last computed, and each shard's last read for it. */
  health: HealthMemory;
  /** AUDIT_HASH_KEY imported once (the bytes it was imported from tell a changed setting). */
  auditHashKey?: { bytes: Uint8Array; key: Promise<CryptoKey> };
}

/** A fresh isolate's state: nothing read, nothing remembered. */
export function newIsolateState(): IsolateState {
  return { settings: {}, clients: new Map(), placement: newPlacementMemory(), health: { reads: new Map() } };
}

/** An isolate's copies of client records, by client_id (src/api/auth/clients.ts reads and fills it). */
export type ClientCache = Map<string, CachedClientRecord>;

/** One client record as this isolate read it. */
export interface CachedClientRecord {
  record: ClientRecord | null;
  /**
   * When the KV read began. A token issued later came from a login that read KV later, through
   * the same edge cache, so this copy may be older than the record that login saw.
   */
  readAt: number;
  until: number;
}

/**
 * What an isolate keeps of the status (src/api/status/health.ts computes it): the last report,
 * each shard's last read, the client counts.
 */
export interface HealthMemory {
  report?: { value: HealthReport; until: number };
  reads: Map<string, ShardRead>;
  clients?: { value: HealthReport["clients"]; until: number };
}

/** What the request-log middleware and the routes share about one request. */
export interface RequestVariables {
  requestId: string;
  /** The isolate's memory, handed down from the app. */
  isolate: IsolateState;
  /** The checked settings; read before any route runs, so a bad setting fails every request. */
  config: ApiConfig;
  /** The caller's client_id once a route has read it, for the log line. */
  clientId?: string;
  /** The route's headers, read and checked before its handler (src/api/middleware.ts). */
  headers?: Record<string, unknown>;
  /** The client a token-bearing route authenticated (src/api/middleware.ts). */
  client?: ClientRecord;
  /** The shard a receipt was stored on or deleted from, for the request's data point. */
  shard?: string;
  /** The caller's limit on a limited route, once its client is known (src/api/rate-limit.ts). */
  ratePolicy?: RatePolicy;
  /** Set when this request was over that limit. */
  rateLimited?: boolean;
}

/** Hono's generic argument for the API Worker. */
export interface ApiBindings {
  Bindings: ApiEnv;
  Variables: RequestVariables;
}

/** The context every route and middleware of the API Worker gets. */
export type ApiContext = Context<ApiBindings>;

type HeadersOf<R> = R extends { headers: infer Schema extends z.ZodMiniType } ? z.output<Schema> : undefined;
type ClientOf<R> = R extends { scope: RouteScope } ? { client: ClientRecord } : unknown;

/**
 * The context a route's handler gets: its headers read, and its client once it takes a token.
 * Here rather than in route-table.ts, so that the table stays data that the OpenAPI generator
 * typechecks and runs in Node without the Workers' types.
 */
export type RouteContext<Name extends RouteName> = ApiContext & {
  readonly var: Readonly<{ headers: HeadersOf<(typeof ROUTES)[Name]> } & ClientOf<(typeof ROUTES)[Name]>>;
};

/** A route's handler, run once every check of its entry has passed. */
export type RouteHandler<Name extends RouteName> = (c: RouteContext<Name>) => Response | Promise<Response>;
