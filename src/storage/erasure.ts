/**
 * Erasure of an app user's data in every shard (docs/api.md#erasure): their receipts, and with
 * them every copy of their data (Idempotency-Key records whose stored answer is one of their
 * receipts, outbox rows, failed notices), an audit record per erased receipt, their audit records
 * pseudonymised, and one `app_user.erased` event for the app push service.
 *
 * The statements run through whatever runs a batch on a shard: `wrangler d1 execute` for
 * `npm run app-users` (which inlines their values), or D1 in a Worker. The work goes in pages,
 * each page one batch (one transaction) that removes a receipt only together with its copies and
 * its audit record: no statement or batch grows with the app user's data,
 * D1 never runs one long write beside the adds it serves, and a run stopped half way is simply
 * run again. This file stays free of Workers types: the operator script runs it on Node.
 */
import { v7 as uuidv7 } from "uuid";
import type { AppUserErasedEvent } from "../shared/schemas.ts";
import { stampShardTag, type ShardBase } from "../shared/shard-ids.ts";
import { auditErasedReceipts, auditErasure, pseudonymiseAudit, receiptsAuditedFor } from "./audit.ts";
import { eraseEventsOfReceipts, eraseLeftoverEventsOfReceipts, recordErasedEvent } from "./outbox/statements.ts";
import { enclose, statement, type Statement } from "./statement.ts";

/** Runs statements on one shard as one batch and returns each statement's rows. */
export type RunStatements = (statements: readonly Statement[]) => Promise<unknown[][]>;

/** A shard as the erasure sees it: the shard, and a way to run SQL on it. */
export interface ErasureShard extends ShardBase {
  run: RunStatements;
}

/** What an erasure did. */
export interface Erasure {
  app_user_id: string;
  receipts_erased: number;
  /** Receipts erased per shard name. */
  shards: Record<string, number>;
  event: AppUserErasedEvent;
}

/** Receipts per page: each page is one short transaction on its shard. */
export const ERASURE_PAGE = 500;

/**
 * Erases an app user in every shard, in turn, then records the erasure's event and its own audit
 * record on the first shard (any shard's outbox reaches the notifier; the first is where an
 * operator looks). Throws when a shard fails: the run is then incomplete and is to be made again,
 * which erases what is left and counts only that.
 *
 * @param hashKey AUDIT_HASH_KEY's bytes, which key the hash kept in place of the app_user_id.
 * @example await eraseAppUser("user-42", shards, key) // { receipts_erased: 3, ... }
 */
export async function eraseAppUser(
  appUserId: string,
  shards: readonly ErasureShard[],
  hashKey: Uint8Array,
  now: () => Date = () => new Date(),
): Promise<Erasure> {
  const first = shards[0];
  if (!first) throw new Error("no shards to erase from");
  const eventId = stampShardTag(uuidv7(), first.tag);
  const user = { id: appUserId, pseudonym: await pseudonym(appUserId, hashKey), request: eventId };

  const perShard: Record<string, number> = {};
  for (const shard of shards) {
    perShard[shard.name] = await eraseOnShard(shard, user, now);
  }
  const receipts = Object.values(perShard).reduce((sum, count) => sum + count, 0);
  const event: AppUserErasedEvent = {
    event_id: eventId,
    type: "app_user.erased",
    occurred_at: now().toISOString(),
    app_user_id: appUserId,
    receipts,
  };
  await first.run(recordErasure(event, user));
  return { app_user_id: appUserId, receipts_erased: receipts, shards: perShard, event };
}

/**
 * The keyed hash kept in audit records in place of an erased app_user_id: the same ID always
 * gives the same value, so an erased app user's records still read as one person's, and without
 * the key no one can test a guess of the ID against it.
 */
export async function pseudonym(appUserId: string, hashKey: Uint8Array): Promise<string> {
  const key = await crypto.subtle.importKey("raw", hashKey, { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
  const mac = new Uint8Array(await crypto.subtle.sign("HMAC", key, new TextEncoder().encode(appUserId)));
  return `hmac-sha256:${Array.from(mac, (byte) => byte.toString(16).padStart(2, "0")).join("")}`;
}

/** The values of one erasure: the app_user_id, its pseudonym and the erasure's event_id. */
interface ErasedUser {
  id: string;
  pseudonym: string;
  request: string;
}

/**
 * Erases the app user on one shard, a page at a time, each page one batch: a page of their
 * receipts and a page of what their deleted receipts left behind. Done when no statement of a
 * batch was cut short by its page size (statements that return nothing count as done).
 */
async function eraseOnShard(shard: ErasureShard, user: ErasedUser, now: () => Date): Promise<number> {
  let erased = 0;
  for (;;) {
    const page = receiptPage(user, now().toISOString());
    const rows = await shard.run([...page, ...leftoverPage(user)]);
    erased += rows[page.length - 1]!.length;
    if (rows.every((returned) => returned.length < ERASURE_PAGE)) return erased;
  }
}

// The chains a shard holds, one index probe each (a loose index scan on receipts_by_app_user,
// whose first column is chain_id): the app user's receipts are then found chain by chain through
// that same index, so erasure needs no index of its own on receipts, which every add would pay for.
const CHAINS = `chains(chain_id) AS (
      SELECT MIN(chain_id) FROM receipts
      UNION ALL
      SELECT (SELECT MIN(chain_id) FROM receipts WHERE chain_id > chains.chain_id) FROM chains WHERE chain_id IS NOT NULL)`;

/**
 * One page of the app user's receipts: audit records, then their copies, then the receipts, so
 * that even statement by statement a stop leaves every receipt it has not reached with its
 * copies, for the next run. The page is the same set in every statement (receipts change only in
 * the last), and the last returns the receipts it erased.
 */
function receiptPage(user: ErasedUser, at: string): Statement[] {
  const page = statement(
    `WITH RECURSIVE ${CHAINS}
    SELECT receipt_id FROM receipts
      WHERE chain_id IN (SELECT chain_id FROM chains) AND app_user_id = ?1
      ORDER BY receipt_id LIMIT ?2`,
    user.id,
    ERASURE_PAGE,
  );
  return [
    auditErasedReceipts(page, at, user.pseudonym, user.request),
    enclose(page, (ids) => `DELETE FROM idempotency_keys WHERE receipt_id IN (${ids})`),
    ...eraseEventsOfReceipts(page),
    enclose(page, (ids) => `DELETE FROM receipts WHERE receipt_id IN (${ids}) RETURNING receipt_id`),
  ];
}

/**
 * One page of what the app user's receipts deleted earlier left behind (found through their
 * audit records, under either name), and of their audit records, which get the pseudonym. Each
 * statement returns what it changed.
 */
function leftoverPage(user: ErasedUser): Statement[] {
  const theirReceipts = receiptsAuditedFor(user.id, user.pseudonym);
  return [
    ...eraseLeftoverEventsOfReceipts(theirReceipts, ERASURE_PAGE),
    enclose(
      theirReceipts,
      (ids, rows) => `DELETE FROM idempotency_keys WHERE rowid IN (SELECT rowid FROM idempotency_keys
      WHERE receipt_id IN (${ids}) LIMIT ${rows}) RETURNING 1`,
      ERASURE_PAGE,
    ),
    pseudonymiseAudit(user.id, user.pseudonym, ERASURE_PAGE),
  ];
}

/**
 * The erasure's event in the outbox, never enqueued: the API Worker's cron job sends it after its
 * grace period, as any event whose queue send failed (docs/api.md#receipt-events). And the
 * erasure's own audit record, also when it erased nothing.
 */
function recordErasure(event: AppUserErasedEvent, user: ErasedUser): Statement[] {
  return [recordErasedEvent(event), auditErasure(event.occurred_at, user.pseudonym, event.event_id)];
}
