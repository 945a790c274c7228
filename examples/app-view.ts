/**
 * What the app side keeps from the events receipts.v2 pushes to it (docs/api.md#deletion-notices):
 * each app user's receipts, built from verified events. Pure and in memory, so that the rules an
 * app must follow can be read and tested apart from HTTP and signatures (examples/app-receiver.ts
 * does those):
 *
 * - Delivery is at least once: the same event may arrive again under the same `webhook-id`, and
 *   is applied once.
 * - A receipt's `receipt.deleted` wins over its `receipt.created`, whatever order they arrive in:
 *   deletions are remembered, so a late created event does not bring a returned item back.
 * - `app_user.erased` drops what the view holds of the user created at or before the erasure's
 *   instant (its `occurred_at`) and keeps the rest: a receipt added after the erasure is the user's
 *   anew, and its created event may well arrive before the erased event. A created event of a
 *   receipt made at or before the instant that still arrives is not applied either.
 * - Event types this view does not know are acknowledged and ignored, so that a new type never
 *   makes the service retry.
 *
 *     const view = new AppView();
 *     const outcome = view.receive(headers["webhook-id"], JSON.parse(body));
 *     console.log(describeOutcome(outcome));
 *     view.receiptsOf("user-42");
 *
 * A real app keeps this in its database, with seen webhook-ids and deleted receipt IDs for at
 * least 14 days, the longest a queue holds a copy of an event (docs/api.md#app-side).
 */
import type { AppUserErasedEvent } from "../src/shared/schemas.ts";
import type { CreationNotice, DeletionNotice } from "../src/shared/types.ts";

/** A receipt as the app shows it: what its `receipt.created` event carried. */
export interface AppReceipt {
  receipt_id: string;
  chain_id: string;
  created_at: string;
  /** The receipt body as the POS sent it to add. */
  receipt: Record<string, unknown>;
}

/** The events the view applies; any other `type` is ignored. */
export type AppEvent =
  /** The queued event, with the receipt body the push adds to it. */
  | (CreationNotice & { receipt: Record<string, unknown> })
  | DeletionNotice
  | AppUserErasedEvent;

/** What one delivery did to the view. */
export type Outcome =
  | { kind: "added" | "already-known"; appUserId: string; receiptId: string; count: number }
  | { kind: "removed" | "deleted-unseen"; appUserId: string; receiptId: string; count: number }
  | { kind: "late-created"; appUserId: string; receiptId: string; count: number; why: "deleted" | "erased" }
  | { kind: "erased"; appUserId: string; dropped: number; count: number }
  | { kind: "repeat"; webhookId: string }
  | { kind: "unknown-type"; type: string };

/** Each app user's receipts, from events received at least once and in any order. */
export class AppView {
  private readonly users = new Map<string, Map<string, AppReceipt>>();
  private readonly seenWebhookIds = new Set<string>();
  private readonly deletedReceipts = new Set<string>();
  private readonly erasedAt = new Map<string, string>();

  /**
   * Applies one verified delivery, unless its `webhook-id` was applied before. Throws a
   * `MalformedEvent` (and records nothing) when `payload` is not an event of a known shape.
   */
  receive(webhookId: string, payload: unknown): Outcome {
    if (this.seenWebhookIds.has(webhookId)) return { kind: "repeat", webhookId };
    const event = readEvent(payload);
    const outcome = event ? this.apply(event) : { kind: "unknown-type" as const, type: String((payload as { type?: unknown }).type) };
    this.seenWebhookIds.add(webhookId);
    return outcome;
  }

  /** The receipts of one app user, oldest first; none for a user the view never heard of. */
  receiptsOf(appUserId: string): AppReceipt[] {
    const receipts = [...(this.users.get(appUserId)?.values() ?? [])];
    return receipts.sort((a, b) => a.created_at.localeCompare(b.created_at) || a.receipt_id.localeCompare(b.receipt_id));
  }

  private apply(event: AppEvent): Outcome {
    const appUserId = event.app_user_id;
    switch (event.type) {
      case "receipt.created": {
        const receipts = this.receiptsMap(appUserId);
        const receiptId = event.receipt_id;
        const erasedAt = this.erasedAt.get(appUserId);
        if (this.deletedReceipts.has(receiptId)) return { kind: "late-created", appUserId, receiptId, count: receipts.size, why: "deleted" };
        // ISO 8601 UTC times of one service compare as strings.
        if (erasedAt !== undefined && event.created_at <= erasedAt) {
          return { kind: "late-created", appUserId, receiptId, count: receipts.size, why: "erased" };
        }
        const known = receipts.has(receiptId);
        receipts.set(receiptId, { receipt_id: receiptId, chain_id: event.chain_id, created_at: event.created_at, receipt: event.receipt });
        return { kind: known ? "already-known" : "added", appUserId, receiptId, count: receipts.size };
      }
      case "receipt.deleted": {
        const receipts = this.receiptsMap(appUserId);
        const receiptId = event.receipt_id;
        this.deletedReceipts.add(receiptId);
        const removed = receipts.delete(receiptId);
        return { kind: removed ? "removed" : "deleted-unseen", appUserId, receiptId, count: receipts.size };
      }
      case "app_user.erased": {
        const receipts = this.receiptsMap(appUserId);
        let dropped = 0;
        for (const [receiptId, receipt] of receipts) {
          if (receipt.created_at <= event.occurred_at && receipts.delete(receiptId)) dropped += 1;
        }
        const previous = this.erasedAt.get(appUserId);
        if (previous === undefined || event.occurred_at > previous) this.erasedAt.set(appUserId, event.occurred_at);
        return { kind: "erased", appUserId, dropped, count: receipts.size };
      }
    }
  }

  private receiptsMap(appUserId: string): Map<string, AppReceipt> {
    let receipts = this.users.get(appUserId);
    if (!receipts) this.users.set(appUserId, (receipts = new Map()));
    return receipts;
  }
}

/** One line for a person watching the receiver: "user-42: +019aa8a4-… (1 receipt)". */
export function describeOutcome(outcome: Outcome): string {
  switch (outcome.kind) {
    case "added":
      return `${outcome.appUserId}: +${outcome.receiptId} (${receipts(outcome.count)})`;
    case "already-known":
      return `${outcome.appUserId}: +${outcome.receiptId} known already (${receipts(outcome.count)})`;
    case "removed":
      return `${outcome.appUserId}: −${outcome.receiptId} (${receipts(outcome.count)})`;
    case "deleted-unseen":
      return `${outcome.appUserId}: −${outcome.receiptId} before its created event; remembered (${receipts(outcome.count)})`;
    case "late-created":
      return `${outcome.appUserId}: +${outcome.receiptId} ignored, ${outcome.why === "deleted" ? "deleted" : "its user erased"} already (${receipts(outcome.count)})`;
    case "erased":
      return `${outcome.appUserId}: erased, ${receipts(outcome.dropped)} dropped (${receipts(outcome.count)})`;
    case "repeat":
      return `webhook-id ${outcome.webhookId} seen already: not applied again`;
    case "unknown-type":
      return `event type ${outcome.type} not known here: acknowledged, ignored`;
  }
}

/** A signed payload that claims a known event type but lacks its fields. */
export class MalformedEvent extends Error {
  override name = "MalformedEvent";
}

function receipts(count: number): string {
  return `${count} receipt${count === 1 ? "" : "s"}`;
}

// Checks only what the view uses; undefined for an unknown type.
function readEvent(payload: unknown): AppEvent | undefined {
  if (typeof payload !== "object" || payload === null) throw new MalformedEvent("the event is not a JSON object");
  const event = payload as Record<string, unknown>;
  const strings = (...names: string[]) => {
    const missing = names.filter((name) => typeof event[name] !== "string" || event[name] === "");
    if (missing.length > 0) throw new MalformedEvent(`${String(event.type)} event lacks ${missing.join(", ")}`);
  };
  switch (event.type) {
    case "receipt.created":
      strings("event_id", "receipt_id", "app_user_id", "chain_id", "created_at");
      if (typeof event.receipt !== "object" || event.receipt === null || Array.isArray(event.receipt)) {
        throw new MalformedEvent("receipt.created event lacks the receipt object");
      }
      return event as AppEvent;
    case "receipt.deleted":
      strings("event_id", "receipt_id", "app_user_id");
      return event as AppEvent;
    case "app_user.erased":
      strings("event_id", "app_user_id", "occurred_at");
      return event as AppEvent;
    default:
      return undefined;
  }
}
