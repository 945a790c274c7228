/**
 * Types shared by the API Worker, the notifier Worker, the operator scripts and the tests.
 * Bindings are declared here by hand rather than generated, so that one file says what each
 * Worker may touch.
 */

/** Bindings and settings of the API Worker (see wrangler.toml). */
export interface ApiEnv {
  /** Receipts, idempotency keys and the notice outbox. */
  DB: D1Database;
  /** Client records, written only by operators (`npm run clients`). */
  CLIENTS: KVNamespace;
  /** Producer side of the deletion-notice queue. */
  NOTICES: Queue<DeletionNotice>;
  /** Slows down repeated failed logins for one client_id. */
  LOGIN_LIMITER: RateLimit;
  /** JSON Web Key Set of HS256 keys; the first key signs, every key verifies. */
  TOKEN_KEYS: string;
  TOKEN_ISSUER: string;
  TOKEN_AUDIENCE: string;
  DOCS_URL: string;
  SUPPORT_CONTACT: string;
  /** How long one isolate may reuse a client record read from KV, in seconds. */
  CLIENT_CACHE_SECONDS: string;
}

/** Bindings and settings of the notifier Worker (see src/notifier/wrangler.toml). */
export interface NotifierEnv {
  DB: D1Database;
  /** Producer side of the dead-letter queue, for notices that retrying cannot fix. */
  FAILED_NOTICES: Queue<DeletionNotice>;
  /** Where notices are POSTed; unset in plain local development, where they are logged. */
  APP_PUSH_URL?: string;
  /** Standard Webhooks signing secret, `whsec_<base64 key>`. */
  APP_PUSH_SECRET?: string;
}

/** A client record as operators store it in KV under `client:<client_id>`. */
export interface ClientRecord {
  client_id: string;
  /** `sha256:<base64url digest>` of the secret; the secret itself is never stored. */
  secret_hash: string;
  /** Chains this client may add and delete receipts for. */
  chains: string[];
  scopes: string[];
  disabled: boolean;
  created_at: string;
  updated_at: string;
}

/** The message the API Worker queues when a receipt is deleted (contract §5). */
export interface DeletionNotice {
  event_id: string;
  type: "receipt.deleted";
  occurred_at: string;
  receipt_id: string;
  app_user_id: string;
  chain_id: string;
  client_id: string;
}

/** The only scope the service knows today (seed §4.1). */
export const POS_SCOPE = "service.pos";

/** KV key of a client record. */
export function clientKey(clientId: string): string {
  return `client:${clientId}`;
}
