/**
 * Shared by the delete and notice tests: receipts put straight into D1, what the outbox, the
 * failed notices and the push receiver hold, and a Standard Webhooks check written apart from
 * the notifier's own signing, so that a test verifies a push as the app side would.
 */
import { env } from "cloudflare:workers";
import { vi } from "vitest";
import { newDeletionNotice } from "../../src/api/events.ts";
import type { CreationNotice, DeletionNotice } from "../../src/shared/types.ts";
import { deleteOwnedReceipt, storeReceipt } from "../../src/storage/receipts.ts";
import { shardOfId } from "../../src/storage/shards.ts";
import { TEST_PUSH_SECRET } from "./keys.ts";
import { type TestClient, uniqueId } from "./api.ts";
import { SHARDS, dbOf, idOn, rowsOnEveryShard } from "./shards.ts";
import { testUserKey } from "./user-keys.ts";


/** The three fields delete compares, plus the receipt's ID. */
export interface SeededReceipt {
  receipt_id: string;
  client_id: string;
  chain_id: string;
  app_user_id: string;
}

/**
 * Stores a receipt of `client` as add would, with fresh IDs unless given, on the shard its
 * receipt_id names (a random shard's for a fresh one). With `createdEvent` (made from the
 * receipt), add's own insert stores it and records that event; without, only the receipt row.
 */
export async function seedReceipt(
  client: TestClient,
  fields: Partial<SeededReceipt> = {},
  createdEvent?: (receipt: SeededReceipt) => CreationNotice,
): Promise<SeededReceipt> {
  const receipt: SeededReceipt = {
    receipt_id: fields.receipt_id ?? idOn(),
    client_id: fields.client_id ?? client.clientId,
    chain_id: fields.chain_id ?? client.chains[0]!,
    app_user_id: fields.app_user_id ?? uniqueId("au"),
  };
  const createdAt = new Date().toISOString();
  const db = dbOf(receipt.receipt_id);
  if (createdEvent) {
    const stored = await storeReceipt({ name: "seeded", db }, { ...receipt, body: "{}", created_at: createdAt, user_key: uniqueId("key") }, createdEvent(receipt));
    if (stored.kind !== "added") throw new Error(`seeded receipt not added: ${stored.kind}`);
    return receipt;
  }
  await db.prepare(
    "INSERT INTO receipts (receipt_id, chain_id, client_id, app_user_id, body, created_at) VALUES (?, ?, ?, ?, ?, ?)",
  )
    .bind(receipt.receipt_id, receipt.chain_id, receipt.client_id, receipt.app_user_id, "{}", createdAt)
    .run();
  return receipt;
}

/** The five delete headers for a receipt, as its owner sends them. */
export function deleteHeadersFor(token: string, receipt: SeededReceipt): Record<string, string> {
  return {
    Authorization: `Bearer ${token}`,
    receipt_id: receipt.receipt_id,
    client_id: receipt.client_id,
    chain_id: receipt.chain_id,
    app_user_id: receipt.app_user_id,
  };
}

export async function receiptExists(receiptId: string): Promise<boolean> {
  const rows = await rowsOnEveryShard("SELECT 1 AS found FROM receipts WHERE receipt_id = ?", receiptId);
  return rows.length > 0;
}

/** An outbox row as migration 0003 defines it. */
export interface OutboxRow {
  event_id: string;
  receipt_id: string;
  payload: string;
  created_at: string;
  enqueued_at: string | null;
  delivered_at: string | null;
  claimed_until: string | null;
  attempts: number;
  last_error: string | null;
  /** Migration 0013: the next attempt's time after a failed one, and the end of the retry window. */
  next_attempt_at: string | null;
  retry_until: string | null;
}

/**
 * Every shard's record of the push service (migration 0013) as a fresh deploy has it: up, no
 * probe due. A test that took the push service down puts it back, for the notifier Worker that
 * other tests run beside the API.
 */
export async function forgetPushEndpoint(): Promise<void> {
  for (const { db } of SHARDS) await db.prepare("UPDATE push_endpoint SET down_since = NULL, probe_at = NULL, up_since = NULL, down_ms = 0").run();
}

export async function outboxRows(receiptId: string): Promise<OutboxRow[]> {
  return rowsOnEveryShard<OutboxRow>("SELECT * FROM notice_outbox WHERE receipt_id = ?", receiptId);
}

/** A receipt's audit records (docs/api.md#audit), oldest first. */
export async function auditRows(receiptId: string): Promise<Record<string, unknown>[]> {
  return rowsOnEveryShard("SELECT * FROM audit_log WHERE receipt_id = ? ORDER BY audit_id", receiptId);
}

export async function failedRows(receiptId: string): Promise<Record<string, unknown>[]> {
  return rowsOnEveryShard("SELECT * FROM failed_notices WHERE receipt_id = ?", receiptId);
}

/** A push as the receiver recorded it. */
export interface RecordedPush {
  url: string;
  status: number;
  headers: Record<string, string>;
  body: string;
}

/** Every push the receiver got for a receipt, oldest first. */
export async function pushesFor(receiptId: string): Promise<RecordedPush[]> {
  const { keys } = await env.PUSH_LOG.list({ prefix: `push:${receiptId}:` });
  const pushes = await Promise.all(keys.map(({ name }) => env.PUSH_LOG.get<RecordedPush>(name, "json")));
  return pushes.filter((push): push is RecordedPush => push !== null);
}

/** Makes the receiver answer every push for this receipt with `status`. */
export async function receiverAnswers(receiptId: string, status: number): Promise<void> {
  await env.PUSH_LOG.put(`respond:${receiptId}`, String(status));
}

/** Waits until the receiver got `count` pushes for a receipt, and returns them. */
export async function waitForPushes(receiptId: string, count = 1, timeout = 10_000): Promise<RecordedPush[]> {
  return vi.waitFor(
    async () => {
      const pushes = await pushesFor(receiptId);
      if (pushes.length < count) throw new Error(`${pushes.length} of ${count} pushes for ${receiptId}`);
      return pushes;
    },
    { timeout, interval: 50 },
  );
}

/** Waits until the outbox holds `count` events of a receipt, each recorded as delivered. */
export async function waitForDelivery(receiptId: string, count = 1): Promise<void> {
  await vi.waitFor(
    async () => {
      const rows = await outboxRows(receiptId);
      if (rows.length < count || rows.some((row) => !row.delivered_at)) {
        throw new Error(`events of ${receiptId} not all delivered yet`);
      }
    },
    { timeout: 10_000, interval: 50 },
  );
}

/**
 * True when `signatureHeader` holds a `v1,` signature of `id.timestamp.body` under `secret`, as
 * the Standard Webhooks specification defines it.
 */
export async function verifyStandardWebhook(
  { id, timestamp, signatureHeader, body }: { id: string; timestamp: string; signatureHeader: string; body: string },
  secret = TEST_PUSH_SECRET,
): Promise<boolean> {
  const keyBytes = Uint8Array.from(atob(secret.replace(/^whsec_/, "")), (char) => char.charCodeAt(0));
  const key = await crypto.subtle.importKey("raw", keyBytes, { name: "HMAC", hash: "SHA-256" }, false, ["verify"]);
  const signed = new TextEncoder().encode(`${id}.${timestamp}.${body}`);
  for (const candidate of signatureHeader.split(" ")) {
    const [version, signature] = candidate.split(",");
    if (version !== "v1" || !signature) continue;
    const bytes = Uint8Array.from(atob(signature), (char) => char.charCodeAt(0));
    if (await crypto.subtle.verify("HMAC", key, bytes, signed)) return true;
  }
  return false;
}

/** Verifies a recorded push: headers, signature, and the body as the outbox holds it. */
export async function expectSignedPush(push: RecordedPush): Promise<{ event_id: string }> {
  const id = push.headers["webhook-id"]!;
  const timestamp = push.headers["webhook-timestamp"]!;
  const valid = await verifyStandardWebhook({ id, timestamp, signatureHeader: push.headers["webhook-signature"]!, body: push.body });
  if (!valid) throw new Error(`push for ${id} is not signed with the test secret: ${JSON.stringify(push.headers)}`);
  if (Math.abs(Number(timestamp) - Date.now() / 1000) > 60) throw new Error(`webhook-timestamp ${timestamp} is not now`);
  if (!push.headers["content-type"]?.startsWith("application/json")) throw new Error("push is not JSON");
  const body = JSON.parse(push.body) as { event_id: string };
  if (body.event_id !== id) throw new Error(`webhook-id ${id} differs from event_id ${body.event_id}`);
  return body;
}

/** The notifier's push and retry settings as src/notifier/wrangler.jsonc deploys them. */
export const DEPLOYED_PUSH_SETTINGS = {
  PUSH_TIMEOUT_SECONDS: "10",
  RETRY_FIRST_DELAY_SECONDS: "10",
  RETRY_MAX_DELAY_SECONDS: "3600",
  NOTICE_RETRY_HOURS: "72",
  PUSH_PROBE_SECONDS: "20",
} as const;

/** A fresh receipt of a fresh client, deleted as delete does it: its notice is in the outbox, not delivered. */
export async function deletedNotice(): Promise<DeletionNotice> {
  const receipt = await seedReceipt({ clientId: uniqueId("pos"), secret: "", chains: [uniqueId("chain")] });
  const shard = shardOfId(SHARDS, receipt.receipt_id)!;
  const notice = newDeletionNotice(receipt, shard);
  const result = await deleteOwnedReceipt(shard, notice, await testUserKey(notice.app_user_id), "test-request");
  if (!result.deleted) throw new Error("the seeded receipt was not deleted");
  return notice;
}
