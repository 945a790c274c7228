/**
 * Types shared by the API Worker, the notifier Worker, the operator scripts and the tests.
 * Worker bindings live in env.ts, which needs the Workers runtime types.
 */

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

/** The message the API Worker queues when a receipt is deleted (docs/api.md#deletion-notices). */
export interface DeletionNotice {
  event_id: string;
  type: "receipt.deleted";
  occurred_at: string;
  receipt_id: string;
  app_user_id: string;
  chain_id: string;
  client_id: string;
}

/** The only scope the service knows today (docs/api.md#login). */
export const POS_SCOPE = "service.pos";

/** KV key of a client record. */
export function clientKey(clientId: string): string {
  return `client:${clientId}`;
}
