/**
 * The test run's shards (vitest.config.ts binds three): where a test finds a receipt or an event
 * by its ID, and the queries that look at every shard at once.
 */
import { env } from "cloudflare:workers";
import { v7 as uuidv7 } from "uuid";
import { idOnShard, shardOfId, shardsOf, type Shard } from "../../src/storage/shards.ts";
import { storedTexts, type StoredColumns } from "../../src/storage/stored-body.ts";

/** Every shard of the test run, ordered by name. */
export const SHARDS: readonly Shard[] = shardsOf(env);

/** The database an ID (receipt_id or event_id) names; fails the test for an ID that names none. */
export function dbOf(id: string): D1Database {
  const shard = shardOfId(SHARDS, id);
  if (!shard) throw new Error(`${id} names no shard of the test run`);
  return shard.db;
}

/** A fresh UUIDv7 on a shard: the given one, or one at random. */
export function idOn(shard: Shard = SHARDS[Math.floor(Math.random() * SHARDS.length)]!): string {
  return idOnShard(uuidv7(), shard);
}

/** The rows a query returns on every shard, one shard after the other. */
export async function rowsOnEveryShard<Row>(sql: string, ...values: unknown[]): Promise<Row[]> {
  const all = await Promise.all(SHARDS.map((shard) => shard.db.prepare(sql).bind(...values).all<Row>()));
  return all.flatMap(({ results }) => results);
}

/**
 * A stored receipt's row, read from the shard its ID names, with its texts as the till sent them
 * in `body` and `mapped` (src/storage/stored-body.ts), as a row stored before migration 0022 held
 * them.
 */
export async function storedReceipt(receiptId: string): Promise<Record<string, unknown> | null> {
  const row = await rawReceipt(receiptId);
  if (!row) return null;
  const { deflated: _deflated, ...columns } = row;
  return { ...columns, ...(await storedTexts(row as unknown as StoredColumns)) };
}

/** A stored receipt's row as the shard its ID names holds it, its texts deflated. */
export async function rawReceipt(receiptId: string): Promise<Record<string, unknown> | null> {
  return dbOf(receiptId).prepare("SELECT * FROM receipts WHERE receipt_id = ?").bind(receiptId).first();
}

/** How many receipts a client holds over all shards. */
export async function receiptsOf(clientId: string): Promise<number> {
  const rows = await rowsOnEveryShard<{ n: number }>("SELECT COUNT(*) AS n FROM receipts WHERE client_id = ?", clientId);
  return rows.reduce((sum, { n }) => sum + n, 0);
}

/**
 * A database every call of which fails with `message`: a shard that is down, or one that
 * answers with D1's overload or SQLite's busy error.
 */
export function failingWith(db: D1Database, message: string): D1Database {
  const fail = () => Promise.reject(new Error(message));
  return new Proxy(db, {
    get(target, property) {
      if (property === "batch" || property === "exec") return fail;
      if (property === "prepare") {
        return () => {
          const statement = { bind: () => statement, run: fail, all: fail, first: fail, raw: fail };
          return statement;
        };
      }
      const value = Reflect.get(target, property, target);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
}
