/**
 * What `npm run status` and `GET /receipts/v2/status` read of one shard (docs/operations.md
 * "Status"): one statement, whose every part reads an index's end or a few rows, so that a
 * monitor polling every 30 seconds costs next to nothing however full the shard is. The counts
 * stop at {@link HEALTH_COUNT_CAP}: past it the number does not change what an operator does,
 * and a count of every row would read every row. The receipts themselves are not counted for
 * the same reason (a `COUNT(*)` reads each one: `npm run shards -- list` does, on demand).
 */
import { outboxHealthColumns, type OutboxHealth } from "./outbox/statements.ts";
import { describeError } from "../shared/log.ts";
import { statement, type Statement } from "./statement.ts";

/** The newest file of migrations/ this code was written for; a shard whose newest applied migration is older lags. */
export const EXPECTED_MIGRATION = "0025_fenced_add_bound.sql";

/** Counts of undelivered events and failed notices stop here. */
export const HEALTH_COUNT_CAP = 10_000;

/** One shard's row of {@link shardHealth}: the outbox's counts stop at {@link HEALTH_COUNT_CAP}. */
export interface ShardHealthRow extends OutboxHealth {
  /** The oldest receipt still in D1: how far behind the archive age the archive is. */
  oldest_receipt_id: string | null;
  last_archive_started_at: string | null;
  last_archive_finished_at: string | null;
  /** The newest migration wrangler recorded as applied. */
  latest_migration: string | null;
}

/** The statement of {@link ShardHealthRow}: one row, every part an index lookup or a bounded scan. */
export function shardHealth(): Statement {
  return statement(
    `SELECT
      ${outboxHealthColumns("?1")},
      (SELECT MIN(receipt_id) FROM receipts) AS oldest_receipt_id,
      (SELECT MAX(started_at) FROM archive_runs) AS last_archive_started_at,
      (SELECT finished_at FROM archive_runs ORDER BY started_at DESC LIMIT 1) AS last_archive_finished_at,
      (SELECT MAX(name) FROM d1_migrations) AS latest_migration`,
    HEALTH_COUNT_CAP,
  );
}

/** A shard's last read for the status, kept in the isolate between computations. */
export interface ShardRead {
  row: ShardHealthRow | null;
  bytes: number | null;
  error?: string;
  at: number;
}

/**
 * One shard's read: `run` runs this file's statement there and answers its rows and
 * D1's meta (`size_after`, the database's bytes). A failure is the shard's error, not the report's.
 */
export async function readShardHealth(run: (health: Statement) => Promise<{ results: unknown[]; meta: object }>, now: Date): Promise<ShardRead> {
  try {
    const { results, meta } = await run(shardHealth());
    return { row: (results[0] as ShardHealthRow | undefined) ?? null, bytes: (meta as { size_after?: number }).size_after ?? null, at: now.getTime() };
  } catch (error) {
    return { row: null, bytes: null, error: describeError(error), at: now.getTime() };
  }
}

