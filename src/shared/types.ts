/**
 * Types shared by the API Worker, the notifier Worker, the operator scripts and the tests.
 * Worker bindings live in env.ts, which needs the Workers runtime types.
 */
import type { AppUserErasedEvent, ReceiptCreatedEvent, ReceiptDeletedEvent } from "./schemas.ts";

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
  /**
   * ISO time of the last `rotate` or `disable`: tokens issued under an earlier value are refused
   * on add and delete. Absent in records written before revocation existed, which revoke nothing.
   */
  tokens_valid_after?: string;
  /**
   * The client's limits on add, delete and the event feed (src/shared/rate-limits.ts), granted
   * with `npm run clients -- tier`; absent is the standard tier.
   */
  rate_tier?: "large" | "xlarge";
}

/**
 * The message the API Worker queues when a receipt is stored (docs/api.md#receipt-events): the
 * pushed event without `receipt`, which the notifier reads from the receipt's own row when it
 * pushes, so the outbox never holds a second copy of the body.
 */
export type CreationNotice = Omit<ReceiptCreatedEvent, "receipt" | "format" | "original">;

/** The message the API Worker queues when a receipt is deleted, pushed as it is. */
export type DeletionNotice = ReceiptDeletedEvent;

/** A receipt's events, as add and delete record them. */
export type ReceiptNotice = CreationNotice | DeletionNotice;

/** Every event of the notices queue, and of its dead-letter queue: an erasure's event too. */
export type QueuedNotice = ReceiptNotice | AppUserErasedEvent;

/**
 * A message of the notices queue that carries several events: the cron's hand-over of events
 * that waited (docs/reliability.md#delivery-for-days), packed so that a drain after a long outage
 * is not held to one event per message of the queue's 5,000 messages a second.
 */
export interface NoticeBundle {
  events: QueuedNotice[];
}

/** A message of the notices queue: one event, as add and delete send it, or a bundle. */
export type NoticeMessage = QueuedNotice | NoticeBundle;

/** The events a message of the notices queue carries. */
export function noticesOf(message: NoticeMessage): QueuedNotice[] {
  return "events" in message ? message.events : [message];
}

/** A message of the SWEEPS queue: these shards, swept as of the cron tick `at` (ISO 8601). */
export interface SweepMessage {
  shards: string[];
  at: string;
}

/**
 * What starts an instance of the erasure's Workflow: an erasure of the app user that the request
 * `request_id` names on the first shard (migration 0020: never the app_user_id itself, which the
 * instance's stored params would keep), or with `part` one of its parts, which the erasure starts
 * itself over some of the shards, at the erasure's event_id and instant.
 */
export interface ErasureParams {
  request_id: string;
  part?: { event_id: string; occurred_at: string; shards: string[] };
}

/** The receipt a queued notice is about, for log lines; an erasure's event is about none. */
export function receiptOf(notice: QueuedNotice): string | undefined {
  return "receipt_id" in notice ? notice.receipt_id : undefined;
}

/** The scope of a point-of-sale client: add and delete (docs/api.md#login). */
export const POS_SCOPE = "service.pos";

/** The scope of the app push service's own client: the event feed (docs/api.md#event-feed). */
export const APP_SCOPE = "service.app";

/** The scope of an operator's monitor: the status (docs/api.md#status). */
export const OPS_SCOPE = "service.ops";

/** Every scope login grants a token for. */
export const SERVICE_SCOPES: readonly string[] = [POS_SCOPE, APP_SCOPE, OPS_SCOPE];

/** KV key of a client record. */
export function clientKey(clientId: string): string {
  return `client:${clientId}`;
}
