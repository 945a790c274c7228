/**
 * What the OpenAPI document says about each operation beyond its schemas: the words, the
 * examples, and one example per row of the error tables of docs/api.md. The schemas themselves
 * are only referenced here; `test/api/routes/openapi-examples.test.ts` replays every error example
 * against the Worker, so an example that drifts from the real answer fails the suite.
 */
import type * as z from "zod/mini";
import { DR_RETAIL_BODIES, DR_RETAIL_PARTS, type DrRetailInput } from "../../shared/dr-retail.ts";
import { drRetailContentType } from "../../shared/dr-retail-profiles.ts";
import { PATHS } from "../../shared/paths.ts";
import { ratePolicy, type LimitedRoute } from "../../shared/rate-limits.ts";
import {
  addHeaders,
  addResponse,
  appUserJobHeaders,
  exportFile,
  jobAccepted,
  jobHeaders,
  jobResponse,
  deleteHeaders,
  deleteResponse,
  feedHeaders,
  feedQuery,
  feedResponse,
  loginHeaders,
  loginResponse,
  statusHeaders,
  statusResponse,
  unhealthyStatusResponse,
  receiptBody,
  type AddResponse,
  type DeleteResponse,
  type LoginResponse,
  type ReceiptBody,
  type ReceiptModel,
} from "../../shared/schemas.ts";
import { FULL_CARD_NUMBER } from "../../shared/card-numbers.ts";
import { MAX_NESTING } from "../i-json.ts";
import {
  REFUSALS,
  bodyTooLarge,
  mediaTypeParameterRepeated,
  missingHeaders,
  rateLimited,
  receiptFieldsDiffer,
  unusableHeaders,
  type Refusal,
} from "../refusals.ts";

/**
 * One row of an error table: the condition and the refusal the Worker answers it with. A 500
 * has no detail: its message is fixed but for the request reference.
 */
export type ErrorExample =
  | { status: 500; /** The condition, as a reader of the error tables looks for it. */ summary: string }
  | (Refusal & { summary: string });

/**
 * An operation as the document describes it; the schemas are the Worker's own, and its method,
 * security and rate-limit fields the route table's (src/api/route-table.ts).
 */
export interface DocumentedOperation {
  operationId: string;
  summary: string;
  description: string;
  headers: z.ZodMiniObject<Record<string, z.ZodMiniType>>;
  /** The query parameters, all optional, of an operation that reads any. */
  query?: z.ZodMiniObject<Record<string, z.ZodMiniType>>;
  /** Present when the operation reads a JSON body; then `headers` holds Content-Type. */
  body?: DocumentedBody & {
    /** Bodies in other formats, each chosen by its own media type (a Content-Type with a profile). */
    alternatives?: readonly (DocumentedBody & { mediaType: string })[];
    /** Schemas the alternatives share, by component name: each is one component they refer to. */
    sharedParts?: Record<string, z.ZodMiniType>;
  };
  success: {
    component: string;
    schema: z.ZodMiniType;
    description: string;
    example: unknown;
    /** 200 unless said: a job's start answers 202. */
    status?: 202;
    /** application/json unless said, with `schema` a component; another media type's example is its text. */
    mediaType?: string;
  };
  /** Answers besides the success and the errors, each with a body of its own (the status's 503 when unhealthy). */
  otherAnswers?: readonly { status: number; component: string; schema: z.ZodMiniType; description: string; example: unknown }[];
  /** The path's parameters (`:name` in the path), each with its words and an example. */
  pathParameters?: Record<string, { description: string; example: string }>;
  /** Keyed by a name unique within the operation; 405 and 500 are added for every operation. */
  errors: Record<string, ErrorExample>;
}

/** A request body as the document describes it: its component's name, schema, words and example. */
export interface DocumentedBody {
  component: string;
  schema: z.ZodMiniType;
  description: string;
  example: unknown;
}

/** The 429 of a limited operation, as a client of the standard tier gets it. */
function rateLimitedError(route: LimitedRoute): ErrorExample {
  return {
    ...rateLimited(ratePolicy(route, "standard"), route),
    summary: "The client sent more requests than its tier allows in the window: wait Retry-After seconds, then send the same request again (with the same Idempotency-Key)",
  };
}

/** add and delete answer 503 when the receipt's shard is overloaded. */
const SHARD_OVERLOADED: ErrorExample = {
  ...REFUSALS.shardOverloaded,
  summary: "The receipt's database (shard) is overloaded or busy and did nothing: send the same request again after Retry-After seconds",
};

const RECEIPT_ID = "019aa8a4-3c1e-7d2b-9f41-6c0e5b2d8a17";

/** The store and till of the DR Retail examples: the document's, the bench's and the soak's. */
export const DR_EXAMPLE_STORE = {
  business_unit: {
    name: "Lindqvists Livs",
    service_id: "15594097555922f97bfeb148d6b9a6ef76f76ebdce",
    unit_id: "store-0042",
    organization_number: "556677-8899",
    contact: { address: { street_address: "Storgatan 1", locality: "Uppsala", postal_code: "753 20" } },
  },
  sales_recording_system: { id: "k3", name: "Kassa 3" },
};

/** A DR Retail receipt, valid in v1.0 and v1.1: a card payment for two lines at two VAT rates. */
export const DR_RETAIL_EXAMPLE = {
  ...DR_EXAMPLE_STORE,
  receipt_identifier: { sequence_number: 117, extended_number: { value: "0042-3-000117", context: "store" } },
  time_of_purchase: "2026-11-22T14:03:00+01:00",
  currency: "SEK",
  items: [
    {
      type: "sale",
      sequence_number: 1,
      identifiers: [{ identifier_type: "gtin", value: "7310000000001" }],
      description: "Bryggkaffe 500 g",
      quantity: { value: 2, unit: "ea" },
      actual_sales_unit_price: 54.9,
      extended_gross_amount: 109.8,
      extended_amount: 109.8,
      tax_percentage: 12,
    },
    {
      type: "sale",
      sequence_number: 2,
      identifiers: [{ identifier_type: "gtin", value: "7310000000002" }],
      description: "Batterier AA 4-pack",
      quantity: { value: 1, unit: "ea" },
      actual_sales_unit_price: 89,
      extended_gross_amount: 89,
      extended_amount: 89,
      tax_percentage: 25,
    },
  ],
  totals: [
    {
      type: "vat",
      amount: 29.56,
      sub_totals: [
        { amount: 11.76, taxable_amount: 109.8, net_amount: 98.04, tax_percentage: 12 },
        { amount: 17.8, taxable_amount: 89, net_amount: 71.2, tax_percentage: 25 },
      ],
    },
    { type: "gross", amount: 198.8 },
    { type: "paid", amount: 198.8 },
  ],
  payments: [{ amount: 198.8, tender: { type: "creditdebit", bank_identification_number: "527500******7651", approval_code: "123456" } }],
} satisfies DrRetailInput;

/** The receipt in our model that {@link DR_RETAIL_EXAMPLE} maps to (docs/api.md#dr-retail-mapping). */
export const DR_RETAIL_EXAMPLE_MAPPED = {
  purchased_at: "2026-11-22T14:03:00+01:00",
  currency: "SEK",
  total: 19880,
  line_items: [
    { description: "Bryggkaffe 500 g", quantity: 2, unit_price: 5490, total: 10980, sku: "7310000000001", vat_rate: 12 },
    { description: "Batterier AA 4-pack", quantity: 1, unit_price: 8900, total: 8900, sku: "7310000000002", vat_rate: 25 },
  ],
  store_id: "store-0042",
  pos_receipt_number: "0042-3-000117",
  payments: [{ method: "creditdebit", amount: 19880 }],
  vat: [
    { rate: 12, amount: 1176, taxable_amount: 10980, net_amount: 9804 },
    { rate: 25, amount: 1780, taxable_amount: 8900, net_amount: 7120 },
  ],
} satisfies ReceiptModel;
const CLIENT_ID = "pos-acme-01";

/**
 * The two header refusals every operation has, with an example of each: the absent headers
 * named (400), and one unusable value with its reason (406).
 */
function headerErrors(missing: string[], unusable: string): Record<string, ErrorExample> {
  return {
    "missing-header": {
      ...missingHeaders(missing),
      summary: "A required header is missing; the message names every missing header",
    },
    "unusable-header": {
      ...unusableHeaders([unusable]),
      summary: "A header value is not a usable string: empty, over 256 characters, or not printable ASCII",
    },
  };
}

/**
 * The refusals of a token-bearing operation (add, delete, the event feed), in the order they are
 * checked; `wrongScope` is the refusal of a token of the other scope.
 */
function bearerErrors(wrongScope: ErrorExample): Record<string, ErrorExample> {
  return {
    "not-bearer": { ...REFUSALS.notBearer, summary: "Authorization is not `Bearer <token>`" },
    "invalid-token": {
      ...REFUSALS.tokenInvalid,
      summary: "The token is malformed, wrongly signed, or for another issuer or audience",
    },
    "expired-token": { ...REFUSALS.tokenExpired, summary: "The token has expired: log in again" },
    "wrong-scope": wrongScope,
    "unknown-client": { ...REFUSALS.unknownClient, summary: "client_id is unknown" },
    "disabled-client": { ...REFUSALS.disabledClient, summary: "client_id names a client the operator disabled" },
    "other-client": { ...REFUSALS.otherClient, summary: "The token was issued to another client than client_id" },
    "revoked-token": {
      ...REFUSALS.tokenRevoked,
      summary: "The token was issued before the client's secret was rotated or the client disabled: log in again",
    },
  };
}

/** The refusals of a GET of a service's own client (the feed, the status): its two headers, then its token. */
function serviceGetErrors(wrongScope: ErrorExample): Record<string, ErrorExample> {
  return {
    ...headerErrors(["Authorization", "client_id"], "Header client_id holds control or non-ASCII characters"),
    ...bearerErrors(wrongScope),
  };
}

/** The app-user jobs take tokens of the app push service's client. */
const APP_SCOPE_ERROR: ErrorExample = { ...REFUSALS.appScope, summary: "The token is of scope service.pos or service.ops, not service.app" };

const JOB_ID = "5b0a9f6e-3f1c-4d2a-9c1e-7a2b3c4d5e6f";

/** A job's path parameter. */
const JOB_PATH_PARAMETERS = { job_id: { description: "The job's ID, from the answer of its start", example: JOB_ID } };

/** The refusals of a job's start (export, erase), in the order they are checked. */
function startJobErrors(): Record<string, ErrorExample> {
  return {
    ...headerErrors(["app_user_id", "Idempotency-Key"], "Header client_id holds control or non-ASCII characters"),
    "malformed-app-user-id": {
      ...unusableHeaders(["Header app_user_id holds control or non-ASCII characters"]),
      status: 400,
      summary: "app_user_id is not one add accepts (empty, white space, over 256 characters, not printable ASCII, sent twice or holding a comma): a bad request",
    },
    ...bearerErrors(APP_SCOPE_ERROR),
    "job-conflict": { ...REFUSALS.jobConflict, summary: "The client used the Idempotency-Key for another job: another app_user_id, or another kind of job" },
    "rate-limited": rateLimitedError("jobs"),
  };
}

/** The refusals of a job's reads, in the order they are checked. */
function readJobErrors(): Record<string, ErrorExample> {
  return {
    ...serviceGetErrors(APP_SCOPE_ERROR),
    "no-job": { ...REFUSALS.noJob, summary: "No job of this client has that ID: never started, started by another client, or forgotten after EXPORT_KEPT_DAYS" },
    "rate-limited": rateLimitedError("jobs"),
  };
}

/** A job's start as the two routes describe it. */
function startJobOperation(kind: "export" | "erasure", operationId: string, summary: string, description: string): DocumentedOperation {
  return {
    operationId,
    summary,
    description:
      `${description} For the app push service's own client (scope service.app). The same Idempotency-Key again, for ` +
      "the same app_user_id and kind of job, answers the same job (kept EXPORT_KEPT_DAYS, 7 days); with another, 409. " +
      "Follow the job with GET /receipts/v2/jobs/{job_id}. Checks run in this order: headers (400, 406; a malformed " +
      "app_user_id is 400), token and client (403), the limit (429), the key (409).",
    headers: appUserJobHeaders,
    success: {
      component: "JobAccepted",
      schema: jobAccepted,
      status: 202,
      description: "Accepted: the job, started or already known under this key",
      example: { data: { job_id: JOB_ID, kind, state: "running" }, status: "Accepted", status_code: 202 } satisfies z.infer<typeof jobAccepted>,
    },
    errors: startJobErrors(),
  };
}

/** add and delete take POS tokens only. */
const POS_BEARER_ERRORS = bearerErrors({
  ...REFUSALS.posScope,
  summary: "The token is of scope service.app (the app push service's client), not service.pos",
});

/** The operations of receipts.v2, keyed by path like the Worker's OPERATIONS. */
export const DOCUMENTED_OPERATIONS: Record<string, DocumentedOperation> = {
  [PATHS.login]: {
    operationId: "login",
    summary: "Trade client credentials for an access token",
    description:
      "Generates a Bearer access token valid for 3600 seconds, of the scope asked for: service.pos for a " +
      "point-of-sale client (add, delete), service.app for the app push service's client (the event feed), " +
      "service.ops for an operator's monitor (the status). " +
      "Send no body. Every 403 of login " +
      "carries the status word `Not Acceptable`, as deployed clients expect. After 5 failed logins " +
      "of one client_id within 60 seconds the next failure answers 429.",
    headers: loginHeaders,
    success: {
      component: "LoginResponse",
      schema: loginResponse,
      description: "OK: the access token",
      example: {
        data: {
          access_token: "eyJhbGciOiJIUzI1NiIsImtpZCI6ImsyMDI2MTEiLCJ0eXAiOiJKV1QifQ.eyJzdWIiOiJwb3MtYWNtZS0wMSJ9.3q2-7w",
          expires_in: 3600,
          token_type: "Bearer",
        },
        status: "OK",
        status_code: 200,
      } satisfies LoginResponse,
    },
    errors: {
      ...headerErrors(["client_secret", "scope"], "Header client_id holds control or non-ASCII characters"),
      "token-type": {
        ...REFUSALS.loginTokenType,
        summary: "token_type is not Bearer",
      },
      scope: {
        ...REFUSALS.loginScope,
        summary: "scope is neither service.pos nor service.app",
      },
      credentials: {
        ...REFUSALS.loginCredentials,
        summary: "Unknown client_id or wrong client_secret: one answer for both",
      },
      disabled: {
        ...REFUSALS.loginDisabled,
        summary: "The client is disabled",
      },
      "scope-not-granted": {
        ...REFUSALS.loginScopeNotGranted,
        summary: "The client's record does not grant the scope asked for (a POS client asking for service.app, or the other way round)",
      },
      "too-many-failures": {
        ...REFUSALS.tooManyLogins,
        summary: "Too many failed logins for this client_id: wait Retry-After seconds",
      },
    },
  },

  [PATHS.add]: {
    operationId: "add",
    summary: "Add a receipt for an app user",
    description:
      "Stores one receipt and answers its service-made receipt_id, a UUIDv7. Checks run in this " +
      "order: headers (400, 406), token and client (403), chain (403), media type and coding (415), size (413), " +
      "a body that has not arrived in full within 10 s (400), body (406), " +
      "Idempotency-Key (409). Repeating an Idempotency-Key within 24 hours with the same body, chain_id and " +
      "app_user_id returns the first answer and stores nothing.",
    headers: addHeaders,
    body: {
      component: "Receipt",
      schema: receiptBody,
      description: "One JSON object in UTF-8, at most 64 KiB; unknown top-level fields are refused",
      example: {
        purchased_at: "2026-11-22T14:03:00+01:00",
        currency: "EUR",
        total: 447,
        line_items: [
          { description: "Oat milk 1 l", quantity: 2, unit_price: 149, total: 298, vat_rate: 7 },
          { description: "Rye bread", quantity: 1, unit_price: 249, total: 249, vat_rate: 7 },
          { description: "Loyalty discount", quantity: 1, unit_price: -100, total: -100 },
        ],
        store_id: "store-0042",
        pos_receipt_number: "0042-7-000123",
        payments: [{ method: "card", amount: 447 }],
        metadata: { loyalty_card: "4711" },
      } satisfies ReceiptBody,
      alternatives: (["1.0", "1.1"] as const).map((version) => ({
        mediaType: drRetailContentType(version),
        component: `DrRetailV${version.replace(".", "")}`,
        schema: DR_RETAIL_BODIES[version],
        description: `A receipt in Kivra's DR Retail v${version}, checked by that version's published rules and mapped into our model (docs/api.md, DR Retail receipts)`,
        example: DR_RETAIL_EXAMPLE,
      })),
      sharedParts: DR_RETAIL_PARTS,
    },
    success: {
      component: "AddResponse",
      schema: addResponse,
      description: "OK: the receipt is stored (or, for a repeated Idempotency-Key, was stored by the first call)",
      example: {
        data: {
          receipt_id: RECEIPT_ID,
          chain_id: "chain-nord",
          client_id: CLIENT_ID,
          app_user_id: "au-7f3c9e",
          created_at: "2026-11-22T13:03:05.123Z",
        },
        status: "OK",
        status_code: 200,
      } satisfies AddResponse,
    },
    errors: {
      ...headerErrors(["chain_id", "Content-Type"], "Header app_user_id holds control or non-ASCII characters"),
      ...POS_BEARER_ERRORS,
      chain: {
        ...REFUSALS.chainNotAllowed,
        summary: "chain_id is not one of the client's chains",
      },
      "media-type": {
        ...REFUSALS.mediaType,
        summary: "Content-Type is not application/json in UTF-8",
      },
      "content-encoding": {
        ...REFUSALS.contentEncoding,
        summary: "Content-Encoding is other than identity: the body must be sent uncompressed",
      },
      "too-large": {
        ...bodyTooLarge(65536),
        summary: "The body is larger than 64 KiB",
      },
      "not-json": {
        ...REFUSALS.notJson,
        summary: "The body is empty, not UTF-8, not JSON, or not one JSON object",
      },
      "not-i-json": {
        status: 406,
        summary:
          `The body is not I-JSON (RFC 7493): a name twice in one object, a lone surrogate, a noncharacter or NUL; or it nests arrays and objects more than ${MAX_NESTING} deep. The message names the first field at fault`,
        detail: "Body field total appears more than once in one object; a body must be I-JSON (RFC 7493).",
      },
      "body-rule": {
        status: 406,
        summary: "The body breaks a rule; the message names up to ten fields by their path",
        detail: "Body field currency must be an ISO 4217 code of 3 upper-case letters; Body field line_items[0].quantity must not be 0.",
      },
      "card-number": {
        status: 406,
        summary:
          "A card-number field of DR Retail (bank_identification_number, a gift card's card_number) holds a full card number, in any form, or a member's name holds one; the message names the first such field, never the number. In any other string one is masked, not refused (masked_fields)",
        detail: `Body field /payments/0/tender/bank_identification_number ${FULL_CARD_NUMBER} (DR Retail v1.1).`,
      },
      "unknown-field": {
        status: 406,
        summary: "The body has a top-level field the operation does not know, such as a typo",
        detail: "Body field totl is not a field of this operation (check its spelling).",
      },
      "unknown-profile": {
        ...REFUSALS.unknownProfile,
        summary: "Content-Type has a profile other than DR Retail v1.0's or v1.1's",
      },
      "media-type-parameter": {
        ...mediaTypeParameterRepeated("profile"),
        summary: "Content-Type has a parameter more than once, or one without a value (such as a bare profile)",
      },
      "dr-body-rule": {
        status: 406,
        summary: "A DR Retail body breaks its version's rules, cannot be mapped exactly, or maps to a receipt that breaks our model's rules; the message names the first field at fault by its JSON pointer",
        detail: "Body field /items/0/quantity/value must be a number (DR Retail v1.1).",
      },
      "idempotency-conflict": {
        ...REFUSALS.idempotencyConflict,
        summary: "The Idempotency-Key was used within 24 hours for a different request",
      },
      "no-open-shard": {
        ...REFUSALS.noOpenShard,
        summary: "Every shard is closed: no new receipt is taken until an operator opens or adds one; a keyed retry of an earlier add still gets its first answer",
      },
      "rate-limited": rateLimitedError("add"),
      "shard-overloaded": SHARD_OVERLOADED,
    },
  },

  [PATHS.delete]: {
    operationId: "delete",
    summary: "Remove a receipt, and so also from the app user",
    description:
      "Deletes the receipt whose receipt_id, client_id, chain_id and app_user_id all match, and notifies the app " +
      "user. Checks run in this order: headers (400, 406), token and client (403), the receipt exists " +
      "(406), its fields match (406 naming each one that differs, or client_id alone on another client's receipt). " +
      "Nothing is deleted and nobody is notified " +
      "unless every check passes; of two deletes racing for one receipt, one gets 200 and the other 406.",
    headers: deleteHeaders,
    success: {
      component: "DeleteResponse",
      schema: deleteResponse,
      description: "OK: the receipt is deleted and the notice to the app user is on its way",
      example: {
        message: `Receipt ${RECEIPT_ID} was deleted and the app user notified.`,
        status: "OK",
        status_code: 200,
      } satisfies DeleteResponse,
    },
    errors: {
      ...headerErrors(["receipt_id", "app_user_id"], "Header receipt_id is longer than 256 characters"),
      ...POS_BEARER_ERRORS,
      "no-receipt": {
        ...REFUSALS.noReceipt,
        summary: "No receipt exists under receipt_id, or it was deleted already",
      },
      mismatch: {
        ...receiptFieldsDiffer(["chain_id", "app_user_id"]),
        summary:
          "client_id, chain_id or app_user_id differs from the receipt's; the message names each, or client_id alone when it differs",
      },
      "rate-limited": rateLimitedError("delete"),
      "shard-overloaded": SHARD_OVERLOADED,
    },
  },
  [PATHS.events]: {
    operationId: "events",
    summary: "Catch up on the events pushed to the app push service",
    description:
      "For the app push service's own client (scope service.app). Returns up to `limit` events after `after`, in " +
      "event_id order across every shard, exactly as they are pushed, whether their push went out yet or not; " +
      "without `after`, from the start of the window (EVENT_FEED_DAYS, 14 days). `next` is the last event's " +
      "event_id, to send as `after` next; null when no event followed `after`, so keep your `after` then. " +
      "The feed holds back its newest FEED_SETTLE_SECONDS (10): every event commits within 5 s of its event_id's " +
      "time, so a reader that follows `next` alone sees every event once, with nothing to re-read. " +
      "A receipt.created whose receipt was deleted since is left out, as the push leaves it out; the " +
      "receipt.deleted is there; one whose receipt moved to the archive stays, with its receipt. An erased app " +
      "user's events are gone but for app_user.erased. Checks run in this " +
      "order: headers (400, 406), token and client (403), after and limit (406). HEAD answers as GET does.",
    headers: feedHeaders,
    query: feedQuery,
    success: {
      component: "EventFeed",
      schema: feedResponse,
      description: "OK: a page of events and the cursor to go on from",
      example: {
        data: {
          events: [
            {
              event_id: "019aa8a5-0b7e-7d2b-8d2f-3e9a1c6b5d40",
              type: "receipt.deleted",
              occurred_at: "2026-11-22T13:05:10.482Z",
              receipt_id: RECEIPT_ID,
              app_user_id: "au-7f3c9e",
              chain_id: "chain-nord",
              client_id: CLIENT_ID,
            },
          ],
          next: "019aa8a5-0b7e-7d2b-8d2f-3e9a1c6b5d40",
        },
        status: "OK",
        status_code: 200,
      } satisfies z.infer<typeof feedResponse>,
    },
    errors: {
      ...serviceGetErrors({ ...REFUSALS.appScope, summary: "The token is of scope service.pos (a POS client's), not service.app" }),
      after: {
        ...REFUSALS.feedAfter,
        summary: "after is not an event_id, names no stored event (never made, erased, purged) or one older than the window, or was sent twice",
      },
      limit: { ...REFUSALS.feedLimit, summary: "limit is not a whole number from 1 to 100, or was sent twice" },
      "rate-limited": rateLimitedError("events"),
    },
  },
  [PATHS.status]: {
    operationId: "status",
    summary: "The service's health, for an operator's monitor",
    description:
      "For an operator's monitor (a client issued with `npm run clients -- issue --ops`, scope service.ops). " +
      "Answers what `npm run status --json` prints: per shard its state, fill against SHARD_FILL_BYTES and " +
      "migrations, the events not yet delivered and the oldest one's age, failed notices, whether the push " +
      "service is marked down, how far each shard's archive is behind, active and disabled clients, and in " +
      "`reasons` every threshold passed. 200 while healthy; **503 when a threshold is passed**, with the same " +
      "`data` beside `message` (`Unhealthy: <codes>`), `status` Service Unavailable and `status_code` 503, so a " +
      "monitor that reads only the status code alerts. Computed at most once per STATUS_CACHE_SECONDS (20) per " +
      "location. Checks run in this order: headers (400, 406), token and client (403). HEAD answers as GET does.",
    headers: statusHeaders,
    success: {
      component: "Status",
      schema: statusResponse,
      description: "OK: healthy",
      example: {
        data: {
          healthy: true,
          reasons: [],
          checked_at: "2026-11-25T12:00:00.000Z",
          shards: [
            {
              name: "s1",
              state: "open",
              full_at: null,
              bytes: 4_512_000_000,
              fill: 0.501,
              latest_migration: "0025_fenced_add_bound.sql",
              migrations_lagging: false,
              undelivered: 3,
              oldest_undelivered_at: "2026-11-25T11:59:58.120Z",
              failed_notices: 0,
              oldest_receipt_at: "2026-10-11T02:14:09.000Z",
              archive_behind_hours: 0,
              last_archive_started_at: "2026-11-25T03:00:01.000Z",
              last_archive_finished_at: "2026-11-25T03:02:40.000Z",
              read_at: "2026-11-25T12:00:00.000Z",
            },
          ],
          delivery: {
            undelivered: 3,
            oldest_undelivered_at: "2026-11-25T11:59:58.120Z",
            oldest_undelivered_age_seconds: 2,
            failed_notices: 0,
            endpoint: { down: false, down_since: null, up_since: "2026-11-24T08:12:00.000Z" },
          },
          clients: { active: 412, disabled: 3 },
          thresholds: {
            delivery_late_seconds: 900,
            failed_notices: 1,
            endpoint_down_seconds: 3600,
            fill_share: 0.8,
            archive_behind_hours: 36,
            expected_migration: "0025_fenced_add_bound.sql",
          },
        },
        status: "OK",
        status_code: 200,
      } satisfies z.infer<typeof statusResponse>,
    },
    otherAnswers: [
      {
        status: 503,
        component: "UnhealthyStatus",
        schema: unhealthyStatusResponse,
        description: "Service Unavailable: unhealthy, a threshold is passed; the same data, each reason in data.reasons",
        example: {
          data: {
            healthy: false,
            reasons: [{ code: "failed_notices", message: "2 failed notice(s) wait for a replay (npm run notices -- failed)." }],
            checked_at: "2026-11-25T12:00:00.000Z",
            shards: [{ name: "s1", state: "open", failed_notices: 2 }],
            delivery: { undelivered: 0, failed_notices: 2 },
            clients: { active: 412, disabled: 3 },
            thresholds: { failed_notices: 1 },
          },
          message: "Unhealthy: failed_notices. See data.reasons and <DOCS_URL>.",
          status: "Service Unavailable",
          status_code: 503,
        } satisfies z.infer<typeof unhealthyStatusResponse>,
      },
    ],
    errors: serviceGetErrors({ ...REFUSALS.opsScope, summary: "The token is of scope service.pos or service.app, not service.ops" }),
  },
  [PATHS.exportAppUser]: startJobOperation(
    "export",
    "exportAppUser",
    "Start an export of everything the service holds of an app user",
    "A shopper's copy of their data (GDPR Art. 15 and 20): every receipt of the app user, live and archived, on every " +
      "shard, in our model with its original and format where it came in another format, its chain, client and " +
      "created_at, and the audit records that name them, as one NDJSON file. The export holds exactly what was " +
      "committed before its instant (`occurred_at` in the job's state): an add or a delete racing it is in or out " +
      "by that rule, whole. The file is kept EXPORT_KEPT_DAYS (7 days); an erasure of the app user removes it at once.",
  ),
  [PATHS.eraseAppUser]: startJobOperation(
    "erasure",
    "eraseAppUser",
    "Start the erasure of an app user",
    "A shopper's erasure on request (GDPR Art. 17): the same job as `npm run app-users -- erase`. When it completes, " +
      "no receipt of the app user created at or before its instant is left in any store, nor any export file of " +
      "theirs, and one app_user.erased event goes to the app push service.",
  ),
  [PATHS.job]: {
    operationId: "job",
    summary: "A job's state",
    description:
      "For the client that started the job: its kind and state (running, complete, failed), and once complete its " +
      "instant and counts. Never the app user. Another client's job answers 404 as an unknown one does. Checks run " +
      "in this order: headers (400, 406), token and client (403), the limit (429), the job (404). HEAD answers as GET does.",
    headers: jobHeaders,
    pathParameters: JOB_PATH_PARAMETERS,
    success: {
      component: "Job",
      schema: jobResponse,
      description: "OK: the job",
      example: {
        data: {
          job_id: JOB_ID,
          kind: "export",
          state: "complete",
          occurred_at: "2026-11-28T09:00:00.000Z",
          counts: { receipts: 212, archived_receipts: 180, audit_records: 3, by_chain: { "chain-nord": 200, "chain-syd": 12 }, archive_read: true },
        },
        status: "OK",
        status_code: 200,
      } satisfies z.infer<typeof jobResponse>,
    },
    errors: readJobErrors(),
  },
  [PATHS.jobExport]: {
    operationId: "jobExport",
    summary: "A complete export's file",
    description:
      "For the client that started the export, once its state is complete: NDJSON (`application/x-ndjson`), one " +
      "line per receipt, then one per audit record that names the app user, then a `summary` line with the counts " +
      "per chain and whether the archive was read. Kept EXPORT_KEPT_DAYS (7 days) after the job started, then " +
      "404. Checks as for the job, then 409 while the job is not a complete export. HEAD answers as GET does.",
    headers: jobHeaders,
    pathParameters: JOB_PATH_PARAMETERS,
    success: {
      component: "ExportFile",
      schema: exportFile,
      mediaType: "application/x-ndjson",
      description: "OK: the file",
      example: [
        JSON.stringify({ receipt_id: RECEIPT_ID, chain_id: "chain-nord", client_id: CLIENT_ID, app_user_id: "au-7f3c9e", created_at: "2026-11-22T13:03:05.123Z", archived: false, receipt: { purchased_at: "2026-11-22T14:03:00+01:00", currency: "SEK", total: 4990, line_items: [{ description: "Tea", quantity: 1, unit_price: 4990, total: 4990 }] } }),
        JSON.stringify({ audit: { at: "2026-11-23T10:00:00.000Z", action: "receipt.deleted", receipt_id: "019aa8a4-3c1e-7d2b-9f41-6c0e5b2d8a18", chain_id: "chain-nord", client_id: CLIENT_ID, request_id: "8f3a1c2b9d4e5f61-FRA" } }),
        JSON.stringify({ summary: { job_id: JOB_ID, occurred_at: "2026-11-28T09:00:00.000Z", receipts: 1, archived_receipts: 0, by_chain: { "chain-nord": 1 }, audit_records: 1, archive_read: true } }),
        "",
      ].join("\n"),
    },
    errors: {
      ...readJobErrors(),
      "not-complete": { ...REFUSALS.exportNotComplete, summary: "The job is still running, failed, or is an erasure" },
    },
  },
};
