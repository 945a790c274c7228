/**
 * Erasure of an app user's data in every shard (docs/api.md#erasure): their receipts, and with
 * them every copy of their data (Idempotency-Key records whose stored answer is one of their
 * receipts, outbox rows, failed notices), an audit record per erased receipt, their audit records
 * pseudonymised, and one `app_user.erased` event for the app push service.
 *
 * The SQL runs through `wrangler d1 execute` (`npm run app-users`), which takes no bind
 * parameters, so every value goes in as a {@link sqlText} literal, which no value can escape. The
 * work goes in pages, each page one batch (one transaction) that removes a receipt only together
 * with its copies and its audit record: no statement or batch grows with the app user's data,
 * D1 never runs one long write beside the adds it serves, and a run stopped half way is simply
 * run again. This file stays free of Workers types: the operator script runs it on Node.
 */
import { v7 as uuidv7 } from "uuid";
import type { AppUserErasedEvent } from "../shared/schemas.ts";
import { stampShardTag, type ShardBase } from "../shared/shard-ids.ts";
import { sqlText } from "./sql-text.ts";

/** Runs SQL statements on one shard as one batch and returns each statement's rows. */
export type RunStatements = (statements: readonly string[]) => Promise<unknown[][]>;

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
  const user = { id: sqlText(appUserId), pseudonym: sqlText(await pseudonym(appUserId, hashKey)), request: sqlText(eventId) };

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

/** The literals of one erasure: the app_user_id, its pseudonym and the erasure's event_id. */
interface UserLiterals {
  id: string;
  pseudonym: string;
  request: string;
}

/**
 * Erases the app user on one shard, a page at a time, each page one batch: a page of their
 * receipts and a page of what their deleted receipts left behind. Done when no statement of a
 * batch was cut short by its page size (statements that return nothing count as done).
 */
async function eraseOnShard(shard: ErasureShard, user: UserLiterals, now: () => Date): Promise<number> {
  let erased = 0;
  for (;;) {
    const page = receiptPage(user, sqlText(now().toISOString()));
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
function receiptPage(user: UserLiterals, at: string): string[] {
  const withPage = `WITH RECURSIVE ${CHAINS},
    page(receipt_id) AS (SELECT receipt_id FROM receipts
      WHERE chain_id IN (SELECT chain_id FROM chains) AND app_user_id = ${user.id}
      ORDER BY receipt_id LIMIT ${ERASURE_PAGE})`;
  return [
    `${withPage}
    INSERT INTO audit_log (at, action, receipt_id, chain_id, client_id, app_user, request_id)
    SELECT ${at}, 'app_user.erased', receipt_id, chain_id, 'operator', ${user.pseudonym}, ${user.request}
    FROM receipts WHERE receipt_id IN (SELECT receipt_id FROM page)`,
    `${withPage} DELETE FROM idempotency_keys WHERE receipt_id IN (SELECT receipt_id FROM page)`,
    `${withPage} DELETE FROM notice_outbox WHERE receipt_id IN (SELECT receipt_id FROM page)`,
    // failed_notices holds dead letters until an operator replays them: few rows, no index.
    `${withPage} DELETE FROM failed_notices WHERE receipt_id IN (SELECT receipt_id FROM page)`,
    `${withPage} DELETE FROM receipts WHERE receipt_id IN (SELECT receipt_id FROM page) RETURNING receipt_id`,
  ];
}

/**
 * One page of what the app user's receipts deleted earlier left behind (found through their
 * audit records, under either name), and of their audit records, which get the pseudonym. Each
 * statement returns what it changed.
 */
function leftoverPage(user: UserLiterals): string[] {
  const theirReceipts = `SELECT receipt_id FROM audit_log
    WHERE app_user IN (${user.id}, ${user.pseudonym}) AND receipt_id IS NOT NULL`;
  return [
    `DELETE FROM notice_outbox WHERE event_id IN (SELECT event_id FROM notice_outbox
      WHERE receipt_id IN (${theirReceipts}) LIMIT ${ERASURE_PAGE}) RETURNING 1`,
    `DELETE FROM failed_notices WHERE event_id IN (SELECT event_id FROM failed_notices
      WHERE receipt_id IN (${theirReceipts}) LIMIT ${ERASURE_PAGE}) RETURNING 1`,
    `DELETE FROM idempotency_keys WHERE rowid IN (SELECT rowid FROM idempotency_keys
      WHERE receipt_id IN (${theirReceipts}) LIMIT ${ERASURE_PAGE}) RETURNING 1`,
    `UPDATE audit_log SET app_user = ${user.pseudonym} WHERE audit_id IN (SELECT audit_id FROM audit_log
      WHERE app_user = ${user.id} LIMIT ${ERASURE_PAGE}) RETURNING 1`,
  ];
}

/**
 * The erasure's event in the outbox, never enqueued: the API Worker's cron job sends it after its
 * grace period, as any notice whose queue send failed (docs/api.md#deletion-notices). The outbox
 * row's receipt_id is the event's own ID, since the event is about no receipt. And the
 * erasure's own audit record, also when it erased nothing.
 */
function recordErasure(event: AppUserErasedEvent, user: UserLiterals): string[] {
  const id = sqlText(event.event_id);
  const at = sqlText(event.occurred_at);
  return [
    `INSERT INTO notice_outbox (event_id, receipt_id, payload, created_at)
    VALUES (${id}, ${id}, ${sqlText(JSON.stringify(event))}, ${at})`,
    `INSERT INTO audit_log (at, action, receipt_id, chain_id, client_id, app_user, request_id)
    VALUES (${at}, 'app_user.erased', NULL, NULL, 'operator', ${user.pseudonym}, ${id})`,
  ];
}
