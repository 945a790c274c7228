/**
 * What the OpenAPI document says about each operation beyond its schemas: the words, the
 * examples, and one example per error row of seed §7 and the contract. The schemas themselves
 * are only referenced here; `test/api/openapi-examples.test.ts` replays every error example
 * against the Worker, so an example that drifts from the real answer fails the suite.
 */
import type * as z from "zod/mini";
import { PATHS } from "../../shared/paths.ts";
import {
  addHeaders,
  addResponse,
  deleteHeaders,
  deleteResponse,
  loginHeaders,
  loginResponse,
  receiptBody,
  type AddResponse,
  type DeleteResponse,
  type LoginResponse,
  type ReceiptBody,
} from "../../shared/schemas.ts";
import type { ErrorStatus } from "../errors.ts";

/**
 * One row of an error table: the condition and the refusal the Worker answers it with. A 500
 * has no detail: its message is fixed but for the request reference.
 */
export type ErrorExample =
  | { status: 500; /** The condition, as a reader of the error tables looks for it. */ summary: string }
  | {
      status: Exclude<ErrorStatus, 500>;
      summary: string;
      /** The `ApiError` detail: the message before the common remark. */
      detail: string;
      /** Login's 403 keeps the status word `Not Acceptable` (seed §7.1). */
      statusWord?: string;
      /** Response headers that belong to the refusal, such as `Allow` or `Retry-After`. */
      headers?: Record<string, string>;
    };

/** A POST operation as the document describes it; the schemas are the Worker's own. */
export interface DocumentedOperation {
  operationId: string;
  summary: string;
  description: string;
  headers: z.ZodMiniObject<Record<string, z.ZodMiniType>>;
  /** Present when the operation reads a JSON body; then `headers` holds Content-Type. */
  body?: { component: string; schema: z.ZodMiniType; description: string; example: unknown };
  success: { component: string; schema: z.ZodMiniType; description: string; example: unknown };
  /** Keyed by a name unique within the operation; 405 and 500 are added for every operation. */
  errors: Record<string, ErrorExample>;
}

const RECEIPT_ID = "019aa8a4-3c1e-7d2b-9f41-6c0e5b2d8a17";
const CLIENT_ID = "pos-acme-01";

const EXPIRED_TOKEN: ErrorExample = {
  status: 403,
  summary: "The token has expired: log in again (seed §7.2)",
  detail: "Header Authorization: the authorization has expired; generate a fresh token with login.",
};

const INVALID_TOKEN: ErrorExample = {
  status: 403,
  summary: "The token is malformed, wrongly signed, for another issuer or audience, or not of scope service.pos",
  detail: "Header Authorization does not hold a valid access token.",
};

const NOT_BEARER: ErrorExample = {
  status: 403,
  summary: "Authorization is not `Bearer <token>`",
  detail: "Header Authorization must be Bearer followed by the token from login.",
};

const UNKNOWN_CLIENT: ErrorExample = {
  status: 403,
  summary: "client_id is unknown (seed §7.2)",
  detail: "Header client_id is unknown.",
};

const DISABLED_CLIENT: ErrorExample = {
  status: 403,
  summary: "client_id names a client the operator disabled",
  detail: "Header client_id names a disabled client.",
};

const OTHER_CLIENT: ErrorExample = {
  status: 403,
  summary: "The token was issued to another client than client_id",
  detail: "Header client_id is not the client the access token was issued to.",
};

const LOGIN_403 = "Not Acceptable";

/** The operations of receipts.v2, keyed by path like the Worker's OPERATIONS. */
export const DOCUMENTED_OPERATIONS: Record<string, DocumentedOperation> = {
  [PATHS.login]: {
    operationId: "login",
    summary: "Trade client credentials for an access token",
    description:
      "Generates a Bearer access token valid for 3600 seconds (seed §4.1). Send no body. Every 403 of login " +
      "carries the status word `Not Acceptable`, as deployed clients expect (seed §7.1). After 5 failed logins " +
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
      "missing-header": {
        status: 400,
        summary: "A required header is missing; the message names every missing header (seed §7.1)",
        detail: "Headers client_secret, scope are missing; there is no default.",
      },
      "unusable-header": {
        status: 406,
        summary: "A header value is not a usable string: empty, over 256 characters, or not printable ASCII (seed §7.1)",
        detail: "Header client_id holds control or non-ASCII characters: not a usable string.",
      },
      "token-type": {
        status: 403,
        summary: "token_type is not Bearer (seed §7.1)",
        detail: "Header token_type must be Bearer.",
        statusWord: LOGIN_403,
      },
      scope: {
        status: 403,
        summary: "scope is not service.pos (seed §7.1)",
        detail: "Header scope must be service.pos.",
        statusWord: LOGIN_403,
      },
      credentials: {
        status: 403,
        summary: "Unknown client_id or wrong client_secret: one answer for both (contract §2)",
        detail: "Headers client_id and client_secret do not match a client issued by the operator.",
        statusWord: LOGIN_403,
      },
      disabled: {
        status: 403,
        summary: "The client is disabled (contract §2)",
        detail: "Header client_id names a disabled client.",
        statusWord: LOGIN_403,
      },
      "scope-not-granted": {
        status: 403,
        summary: "The client's record does not grant service.pos (contract §2)",
        detail: "Header scope service.pos is not granted to this client.",
        statusWord: LOGIN_403,
      },
      "too-many-failures": {
        status: 429,
        summary: "Too many failed logins for this client_id: wait Retry-After seconds (contract §2)",
        detail: "Too many failed logins for header client_id; wait before trying again.",
        headers: { "retry-after": "60" },
      },
    },
  },

  [PATHS.add]: {
    operationId: "add",
    summary: "Add a receipt for an app user",
    description:
      "Stores one receipt and answers its service-made receipt_id, a UUIDv7 (contract §3). Checks run in this " +
      "order: headers (400, 406), token and client (403), chain (403), media type (415), size (413), a body " +
      "that has not arrived in full within 10 s (400), body (406), " +
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
      "missing-header": {
        status: 400,
        summary: "A required header is missing; the message names every missing header",
        detail: "Headers chain_id, Content-Type are missing; there is no default.",
      },
      "unusable-header": {
        status: 406,
        summary: "A header value is not a usable string: empty, over 256 characters, or not printable ASCII",
        detail: "Header app_user_id holds control or non-ASCII characters: not a usable string.",
      },
      "not-bearer": NOT_BEARER,
      "invalid-token": INVALID_TOKEN,
      "expired-token": EXPIRED_TOKEN,
      "unknown-client": UNKNOWN_CLIENT,
      "disabled-client": DISABLED_CLIENT,
      "other-client": OTHER_CLIENT,
      chain: {
        status: 403,
        summary: "chain_id is not one of the client's chains",
        detail: "Header chain_id names a chain this client may not add receipts for.",
      },
      "media-type": {
        status: 415,
        summary: "Content-Type is not application/json in UTF-8",
        detail: "Header Content-Type must be application/json, in UTF-8.",
      },
      "too-large": {
        status: 413,
        summary: "The body is larger than 64 KiB",
        detail: "Body is larger than 64 KiB (65536 bytes).",
      },
      "not-json": {
        status: 406,
        summary: "The body is empty, not UTF-8, not JSON, or not one JSON object",
        detail: "Body is not valid JSON; send one JSON object.",
      },
      "body-rule": {
        status: 406,
        summary: "The body breaks a rule; the message names up to ten fields by their path",
        detail: "Body field currency must be an ISO 4217 code of 3 upper-case letters; Body field line_items[0].quantity must not be 0.",
      },
      "unknown-field": {
        status: 406,
        summary: "The body has a top-level field the operation does not know, such as a typo",
        detail: "Body field totl is not a field of this operation (check its spelling).",
      },
      "idempotency-conflict": {
        status: 409,
        summary: "The Idempotency-Key was used within 24 hours for a different request",
        detail:
          "Header Idempotency-Key was used by this client within 24 hours for a different request (body, chain_id or app_user_id); use a new key for a new receipt.",
      },
    },
  },

  [PATHS.delete]: {
    operationId: "delete",
    summary: "Remove a receipt, and so also from the app user",
    description:
      "Deletes the receipt whose receipt_id, client_id, chain_id and app_user_id all match, and notifies the app " +
      "user (seed §4.3). Checks run in this order: headers (400, 406), token and client (403), the receipt exists " +
      "(406), its fields match (406 naming each one that differs, or client_id alone on another client's receipt). Nothing is deleted and nobody is notified " +
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
      "missing-header": {
        status: 400,
        summary: "A required header is missing; the message names every missing header (seed §7.2)",
        detail: "Headers receipt_id, app_user_id are missing; there is no default.",
      },
      "unusable-header": {
        status: 406,
        summary: "A header value is not a usable string: empty, over 256 characters, or not printable ASCII (seed §7.2)",
        detail: "Header receipt_id is longer than 256 characters: not a usable string.",
      },
      "not-bearer": NOT_BEARER,
      "invalid-token": INVALID_TOKEN,
      "expired-token": EXPIRED_TOKEN,
      "unknown-client": UNKNOWN_CLIENT,
      "disabled-client": DISABLED_CLIENT,
      "other-client": OTHER_CLIENT,
      "no-receipt": {
        status: 406,
        summary: "No receipt exists under receipt_id, or it was deleted already (seed §7.2)",
        detail: "Header receipt_id: no receipt exists under this ID.",
      },
      mismatch: {
        status: 406,
        summary:
          "client_id, chain_id or app_user_id differs from the receipt's; the message names each, or client_id alone when it differs (seed §7.2)",
        detail: "Headers chain_id, app_user_id do not match the receipt's chain_id, app_user_id.",
      },
    },
  },
};
