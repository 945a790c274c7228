/**
 * Every refusal a client can get, in one catalogue: the routes throw these, and the OpenAPI
 * document shows them as its error examples, so the two can never word one refusal differently
 * (test/api/routes/openapi-examples.test.ts replays each example against the Worker).
 */
import { DR_RETAIL_PROFILES } from "../shared/dr-retail-profiles.ts";
import type { LimitedRoute, RatePolicy } from "../shared/rate-limits.ts";
import { APP_SCOPE, OPS_SCOPE, POS_SCOPE } from "../shared/types.ts";
import { ApiError, type ErrorStatus } from "./errors.ts";

/** A refusal as the client sees it; the common remark is added when it is rendered. */
export interface Refusal {
  status: Exclude<ErrorStatus, 500>;
  /** What is wrong, naming the header or field: "Header client_id is unknown." */
  detail: string;
  /** Overrides the status word; only login's 403 needs it (docs/api.md#login-errors). */
  statusWord?: string;
  /** Response headers that belong to the refusal, such as `Retry-After`. */
  headers?: Record<string, string>;
}

// Login's 403 keeps the status word "Not Acceptable": deployed clients match on it.
const LOGIN_403 = { status: 403, statusWord: "Not Acceptable" } as const;

// Login and the token-bearing routes refuse a disabled client in the same words.
const DISABLED_CLIENT = "Header client_id names a disabled client.";

/** How long a client that failed to log in too often waits; the limiter's period in wrangler.jsonc. */
const LOGIN_RETRY_AFTER_SECONDS = 60;

/** How long a till waits while every shard is closed: an opened or added shard takes new receipts within 65 s. */
const NO_OPEN_SHARD_RETRY_AFTER_SECONDS = 60;

/**
 * How long a till waits when its receipt's shard is overloaded: D1 sheds a queue of requests
 * within seconds, and a new receipt without a key goes to another shard on its retry.
 */
const SHARD_OVERLOADED_RETRY_AFTER_SECONDS = 5;

/** The refusals whose words never change. */
export const REFUSALS = {
  loginTokenType: { ...LOGIN_403, detail: "Header token_type must be Bearer." },
  loginScope: { ...LOGIN_403, detail: `Header scope must be ${POS_SCOPE}, ${APP_SCOPE} or ${OPS_SCOPE}.` },
  loginCredentials: {
    ...LOGIN_403,
    detail: "Headers client_id and client_secret do not match a client issued by the operator.",
  },
  loginDisabled: { ...LOGIN_403, detail: DISABLED_CLIENT },
  loginScopeNotGranted: { ...LOGIN_403, detail: "Header scope names a scope not granted to this client." },
  tooManyLogins: {
    status: 429,
    detail: "Too many failed logins for header client_id; wait before trying again.",
    headers: { "retry-after": String(LOGIN_RETRY_AFTER_SECONDS) },
  },

  notBearer: { status: 403, detail: "Header Authorization must be Bearer followed by the token from login." },
  tokenExpired: {
    status: 403,
    detail: "Header Authorization: the authorization has expired; generate a fresh token with login.",
  },
  tokenInvalid: { status: 403, detail: "Header Authorization does not hold a valid access token." },
  posScope: { status: 403, detail: `Header Authorization holds a token without the ${POS_SCOPE} scope.` },
  appScope: { status: 403, detail: `Header Authorization holds a token without the ${APP_SCOPE} scope.` },
  opsScope: { status: 403, detail: `Header Authorization holds a token without the ${OPS_SCOPE} scope.` },
  unknownClient: { status: 403, detail: "Header client_id is unknown." },
  disabledClient: { status: 403, detail: DISABLED_CLIENT },
  otherClient: { status: 403, detail: "Header client_id is not the client the access token was issued to." },
  tokenRevoked: {
    status: 403,
    detail:
      "Header Authorization holds a token issued before the client's secret was rotated or the client disabled; generate a fresh token with login.",
  },

  chainNotAllowed: { status: 403, detail: "Header chain_id names a chain this client may not add receipts for." },
  mediaType: { status: 415, detail: "Header Content-Type must be application/json, in UTF-8." },
  unknownProfile: {
    status: 415,
    detail: `Header Content-Type names a profile this service does not read; send none for this service's own receipt, or one of: ${Object.keys(DR_RETAIL_PROFILES).join(", ")}.`,
  },
  contentEncoding: {
    status: 415,
    detail: "Header Content-Encoding must be identity, or absent: send the body uncompressed.",
  },
  emptyBody: { status: 406, detail: "Body is empty; send one JSON object." },
  notJson: { status: 406, detail: "Body is not valid JSON; send one JSON object." },
  notObject: { status: 406, detail: "Body must be one JSON object." },
  notUtf8: { status: 406, detail: "Body is not valid UTF-8; send one JSON object in UTF-8." },
  idempotencyConflict: {
    status: 409,
    detail:
      "Header Idempotency-Key was used by this client within 24 hours for a different request (body, chain_id or app_user_id); use a new key for a new receipt.",
  },

  noReceipt: { status: 406, detail: "Header receipt_id: no receipt exists under this ID." },

  noOpenShard: {
    status: 503,
    detail: "The service takes no new receipts now; send the same request again after Retry-After seconds.",
    headers: { "retry-after": String(NO_OPEN_SHARD_RETRY_AFTER_SECONDS) },
  },
  shardOverloaded: {
    status: 503,
    detail:
      "The receipt's database is overloaded and took no action; send the same request again after Retry-After seconds.",
    headers: { "retry-after": String(SHARD_OVERLOADED_RETRY_AFTER_SECONDS) },
  },
  feedAfter: {
    status: 406,
    detail:
      "Query parameter after names no event of the feed: not an event_id, unknown, erased, or older than the feed's window; start again without after.",
  },
  feedLimit: { status: 406, detail: "Query parameter limit must be a whole number from 1 to 100." },
  jobConflict: {
    status: 409,
    detail: "Header Idempotency-Key was used by this client for another job (another app_user_id, or another kind of job); use a new key for a new job.",
  },
  noJob: { status: 404, detail: "Path names no job this client started, or its record is gone (kept EXPORT_KEPT_DAYS)." },
  exportNotComplete: { status: 409, detail: "Path: the job is not a complete export; read the job until its state is complete." },
} as const satisfies Record<string, Refusal>;

/**
 * The client is over its limit on a route (429). The binding tells no time to its window's end,
 * so Retry-After is the whole window: by then the count has restarted.
 */
export function rateLimited(policy: RatePolicy, route: LimitedRoute): Refusal {
  return {
    status: 429,
    detail:
      `Too many ${ROUTE_WORDS[route]} requests for header client_id: the limit is ${policy.quota} per ${policy.windowSeconds} s ` +
      `(policy ${policy.name}); send the same request again after Retry-After seconds.`,
    headers: { "retry-after": String(policy.windowSeconds) },
  };
}

/** How a 429's message names each limited route. */
const ROUTE_WORDS: Record<LimitedRoute, string> = { add: "add", delete: "delete", events: "event feed", jobs: "app-user job" };

/** Every header of `names` is absent (400), all named in one message. */
export function missingHeaders(names: readonly string[]): Refusal {
  return { status: 400, detail: `${listNames("Header", names)} missing; there is no default.` };
}

/** Header values that are present but unusable (406); `reasons` read "Header x is ...". */
export function unusableHeaders(reasons: readonly string[]): Refusal {
  return { status: 406, detail: `${reasons.join("; ")}: not a usable string.` };
}

/** The body is over its byte limit (413). */
export function bodyTooLarge(maxBytes: number): Refusal {
  return { status: 413, detail: `Body is larger than ${maxBytes / 1024} KiB (${maxBytes} bytes).` };
}

/** A parameter of Content-Type given more than once (415), which readers would take differently. */
export function mediaTypeParameterRepeated(name: string): Refusal {
  return { status: 415, detail: `Header Content-Type has the parameter ${shortName(name)} more than once; send each parameter once.` };
}

/** A parameter of Content-Type without a value (415); `profile` says which values it takes. */
export function mediaTypeParameterWithoutValue(name: string): Refusal {
  const values = name === "profile" ? `: send none for this service's own receipt, or one of: ${Object.keys(DR_RETAIL_PROFILES).join(", ")}` : "";
  return { status: 415, detail: `Header Content-Type has the parameter ${shortName(name)} without a value${values}.` };
}

// A parameter's name as the client sent it, within a header's 256 characters: cut where a
// message would be mostly the name.
function shortName(name: string): string {
  return name.length > 40 ? `${name.slice(0, 40)}…` : name;
}

/** Fields of a receipt that differ from the request's headers (406), named but never shown. */
export function receiptFieldsDiffer(names: readonly string[]): Refusal {
  const list = names.join(", ");
  return {
    status: 406,
    detail:
      names.length === 1
        ? `Header ${list} does not match the receipt's ${list}.`
        : `Headers ${list} do not match the receipt's ${list}.`,
  };
}

/** The error a route throws for a refusal; `cause` goes to the log line only. */
export function refuse(refusal: Refusal, cause?: string): ApiError {
  return new ApiError(refusal.status, refusal.detail, {
    ...(refusal.statusWord && { statusWord: refusal.statusWord }),
    ...(refusal.headers && { headers: refusal.headers }),
    ...(cause !== undefined && { cause }),
  });
}

function listNames(noun: string, names: readonly string[]): string {
  return names.length === 1 ? `${noun} ${names[0]} is` : `${noun}s ${names.join(", ")} are`;
}
