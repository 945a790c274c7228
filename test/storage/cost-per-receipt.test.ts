/**
 * What one receipt costs its shard over its whole life, counted on the real local D1 as
 * docs/scale.md §4 and §7 count it: statements run, and rows written as D1 reports them
 * (`meta.rows_written`, an index entry counting as a row). The life: a keyed add, its created
 * event claimed and marked delivered by the notifier, purged after its retention, the key's
 * expiry; and for a return (5 % of receipts in the model) the delete, its event's life and the
 * audit record's purge. Each phase runs through the same operations the Workers run.
 */
import { describe, expect, it } from "vitest";
import type { AddResponse } from "../../src/shared/schemas.ts";
import type { CreationNotice, DeletionNotice } from "../../src/shared/types.ts";
import { purgeExpiredAudit } from "../../src/storage/audit.ts";
import { claimEvents, purgeDelivered, settleEvents } from "../../src/storage/outbox/operations.ts";
import { deleteExpiredIdempotencyKeys, deleteOwnedReceipt, storeReceipt, type FencedReceipt } from "../../src/storage/receipts.ts";
import { deleteInRounds } from "../../src/storage/rounds.ts";
import { uniqueId } from "../support/api.ts";
import { SHARDS, idOn } from "../support/shards.ts";
import { testUserKey } from "../support/user-keys.ts";

const shard = SHARDS[0]!;
const YEAR_MS = 400 * 24 * 60 * 60 * 1000;
/** Share of receipts returned (deleted), as docs/scale.md §1 assumes. */
const RETURNS = 0.05;

interface Cost {
  statements: number;
  rowsWritten: number;
  /** Rows written by each statement, in order. */
  perStatement: number[];
}

/** A D1 database that counts the statements run through it and the rows they wrote. */
function counted(db: D1Database): { db: D1Database; cost: Cost } {
  const cost: Cost = { statements: 0, rowsWritten: 0, perStatement: [] };
  const note = <T extends D1Result | D1Response>(result: T): T => {
    cost.statements += 1;
    cost.rowsWritten += result.meta.rows_written ?? 0;
    cost.perStatement.push(result.meta.rows_written ?? 0);
    return result;
  };
  const wrap = (prepared: D1PreparedStatement): D1PreparedStatement =>
    new Proxy(prepared, {
      get(target, name) {
        if (name === "bind") return (...values: unknown[]) => wrap(target.bind(...values));
        if (name === "run" || name === "all") return async () => note(await target[name]());
        if (name === "first") throw new Error("first() reports no rows_written: measure with all()");
        return Reflect.get(target, name, target);
      },
    });
  const proxy = new Proxy(db, {
    get(target, name) {
      if (name === "prepare") return (sql: string) => wrap(target.prepare(sql));
      if (name === "batch") {
        return async (statements: D1PreparedStatement[]) => (await target.batch(statements)).map(note);
      }
      return Reflect.get(target, name, target);
    },
  });
  return { db: proxy, cost };
}

async function measure(run: (db: D1Database) => Promise<unknown>): Promise<Cost> {
  const { db, cost } = counted(shard.db);
  await run(db);
  return cost;
}

/** The event's life after its record: one claim and one delivered mark, alone in their queue batch. */
async function eventLife(db: D1Database, eventId: string, now: Date): Promise<void> {
  const [claim] = await claimEvents(db, [eventId], now, 60_000);
  expect(claim!.status).toBe("claimed");
  await settleEvents(db, { delivered: [eventId], failed: [] }, now);
}

describe("docs/scale.md: statements and rows written per receipt on its shard", () => {
  it("a receipt's life: add one batch of 2 writing 7 rows, its event 2 statements and 2 rows, at most 5 statements and 12 rows written in all", async () => {
    const now = new Date();
    const clientId = uniqueId("pos-cost");
    const receipt: FencedReceipt = {
      receipt_id: idOn(shard),
      chain_id: "chain-cost",
      client_id: clientId,
      app_user_id: uniqueId("au"),
      body: JSON.stringify({ total: 1, note: "x".repeat(2_000) }),
      created_at: now.toISOString(),
      user_key: "hmac-sha256:no-erasure",
    };
    const data = { ...receipt, body: undefined, user_key: undefined };
    const response: AddResponse = { data, status: "OK", status_code: 200 } as unknown as AddResponse;
    const created: CreationNotice = {
      event_id: idOn(shard),
      type: "receipt.created",
      occurred_at: receipt.created_at,
      receipt_id: receipt.receipt_id,
      app_user_id: receipt.app_user_id,
      chain_id: receipt.chain_id,
      client_id: clientId,
      created_at: receipt.created_at,
    };
    const claim = { key: uniqueId("key"), fingerprint: "f", response };

    const add = await measure(async (db) => expect((await storeReceipt({ ...shard, db }, receipt, created, claim)).kind).toBe("added"));
    const createdLife = await measure((db) => eventLife(db, created.event_id, now));

    const deleted: DeletionNotice = {
      event_id: idOn(shard),
      type: "receipt.deleted",
      occurred_at: now.toISOString(),
      receipt_id: receipt.receipt_id,
      app_user_id: receipt.app_user_id,
      chain_id: receipt.chain_id,
      client_id: clientId,
    };
    const remove = await measure(async (db) => expect(await deleteOwnedReceipt({ ...shard, db }, deleted, await testUserKey(deleted.app_user_id), "ray-cost")).toEqual({ deleted: true }));
    const deletedLife = await measure((db) => eventLife(db, deleted.event_id, now));

    // The cron jobs' purges, each a page of many rows in one statement: only their rows count.
    const later = new Date(now.getTime() + YEAR_MS);
    const purgeEvents = await measure((db) => purgeDelivered(db, later, 1000));
    const expireKey = await measure((db) => deleteExpiredIdempotencyKeys(db, later));
    const purgeAudit = await measure((db) => deleteInRounds(db, (rows) => purgeExpiredAudit(later, rows)));

    const perEventPurge = purgeEvents.rowsWritten / 2;
    const kept = {
      statements: add.statements + createdLife.statements,
      rowsWritten: add.rowsWritten + createdLife.rowsWritten + perEventPurge + expireKey.rowsWritten,
    };
    const returned = {
      statements: remove.statements + deletedLife.statements,
      rowsWritten: remove.rowsWritten + deletedLife.rowsWritten + perEventPurge + purgeAudit.rowsWritten,
    };
    const perReceipt = {
      statements: kept.statements + RETURNS * returned.statements,
      rowsWritten: kept.rowsWritten + RETURNS * returned.rowsWritten,
    };
    console.log(JSON.stringify({ add, createdLife, remove, deletedLife, purgeEvents, expireKey, purgeAudit, perReceipt }));

    expect(add).toMatchObject({ statements: 2, rowsWritten: 7 });
    expect(createdLife).toMatchObject({ statements: 2, rowsWritten: 2 });
    // The fifth copies the receipt for an export of its app user that is running; it writes no row without one.
    expect(remove.statements).toBe(5);
    expect(perReceipt.rowsWritten).toBeLessThanOrEqual(12);
    // One queue batch per event is the notifier's least efficient case; a busy shard shares the
    // claim and the delivered mark among the events of a batch.
    expect(perReceipt.statements).toBeLessThanOrEqual(5);
  });
});
