/**
 * The error model shared by every route (docs/api.md#errors, docs/api.md#common-rules): one JSON shape, fixed status
 * words, and messages that name the header or field at fault.
 */
import type { ErrorResponse as ErrorBody } from "../shared/schemas.ts";

/** Status words of docs/api.md#common-rules. */
export const STATUS_WORDS = {
  200: "OK",
  400: "Bad Request",
  403: "Forbidden",
  404: "Not Found",
  405: "Method Not Allowed",
  406: "Not Acceptable",
  409: "Conflict",
  413: "Payload Too Large",
  415: "Unsupported Media Type",
  429: "Too Many Requests",
  500: "Internal Server Error",
  503: "Service Unavailable",
} as const;

export type ErrorStatus = Exclude<keyof typeof STATUS_WORDS, 200>;

/**
 * A refusal that the client is meant to see. Routes throw it; the app's error handler renders it
 * with the operator's docs and support pointer and logs `cause` (never shown to the client).
 */
export class ApiError extends Error {
  override name = "ApiError";
  readonly status: ErrorStatus;
  /** What is wrong, naming the header or field: "Header client_id is missing." */
  readonly detail: string;
  readonly options: ApiErrorOptions;

  // Fields spelled out rather than as parameter properties: Node's type stripping runs this file
  // when `npm run openapi` renders the error examples, and it refuses that syntax.
  constructor(status: ErrorStatus, detail: string, options: ApiErrorOptions = {}) {
    super(detail);
    this.status = status;
    this.detail = detail;
    this.options = options;
  }
}

/** How an ApiError is rendered and logged beyond its status and detail. */
export interface ApiErrorOptions {
  /** Overrides the status word; only login's 403 needs it (docs/api.md#login-errors). */
  statusWord?: string;
  headers?: Record<string, string>;
  /** The real reason, for the log line only. */
  cause?: string;
}

/** Where the operator's documentation and support live; from wrangler vars. */
export interface SupportPointer {
  docsUrl: string;
  supportContact: string;
}

// The generic remark every client-error message ends with (docs/api.md#errors).
function invalidSyntaxRemark(support: SupportPointer): string {
  return `The request has invalid syntax. See ${support.docsUrl} or contact ${support.supportContact}.`;
}

// A 5xx refusal is no fault of the request: it gets the pointer without the remark on syntax.
function serviceRemark(support: SupportPointer): string {
  return `See ${support.docsUrl} or contact ${support.supportContact}.`;
}

/** Renders an ApiError as the documented body. */
export function errorBody(error: ApiError, support: SupportPointer): ErrorBody {
  const remark = error.status >= 500 ? serviceRemark(support) : invalidSyntaxRemark(support);
  return {
    message: `${error.detail} ${remark}`,
    status: error.options.statusWord ?? STATUS_WORDS[error.status],
    status_code: error.status,
  };
}

/** The body of a 500: no stack, SQL or binding name, only a reference found in the log line. */
export function internalErrorBody(requestId: string, support: SupportPointer): ErrorBody {
  return {
    message: `Unknown error; contact support (${support.supportContact}) quoting reference ${requestId}.`,
    status: STATUS_WORDS[500],
    status_code: 500,
  };
}

/** Used when even the settings are unreadable, so the pointer cannot be named. */
export const UNCONFIGURED_SUPPORT: SupportPointer = {
  docsUrl: "the operator's documentation",
  supportContact: "the operator's support",
};
