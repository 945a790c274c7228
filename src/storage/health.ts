/**
 * What `npm run status` and `GET /receipts/v2/status` read of one shard (docs/operations.md
 * "Status"): one statement, whose every part reads an index's end or a few rows, so that a
 * monitor polling every 30 seconds costs next to nothing however full the shard is. The counts
 * stop at {@link HEALTH_COUNT_CAP}: past it the number does not change what an operator does,
 * and a count of every row would read every row. The receipts themselves are not counted for
 * the same reason (a `COUNT(*)` reads each one: `npm run shards -- list` does, on demand).
 */
import { statement, type Statement } from "./statement.ts";

/** The newest file of migrations/ this code was written for; a shard whose newest applied migration is older lags. */
export const EXPECTED_MIGRATION = "0020_erasure_requests.sql";

/** Counts of undelivered events and failed notices stop here. */
export const HEALTH_COUNT_CAP = 10_000;

/** One shard's row of {@link shardHealth}. */
export interface ShardHealthRow {
  /** Events not delivered yet, at most {@link HEALTH_COUNT_CAP}. */
  undelivered: number;
  oldest_undelivered_at: string | null;
  /** Failed notices waiting for a replay, at most {@link HEALTH_COUNT_CAP}. */
  failed_notices: number;
  /** This shard's copy of the push service's state (the notifier writes every shard). */
  endpoint_down_since: string | null;
  endpoint_up_since: string | null;
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
      (SELECT COUNT(*) FROM (SELECT 1 FROM notice_outbox WHERE delivered_at IS NULL LIMIT ?1)) AS undelivered,
      (SELECT MIN(created_at) FROM notice_outbox WHERE delivered_at IS NULL) AS oldest_undelivered_at,
      (SELECT COUNT(*) FROM (SELECT 1 FROM failed_notices LIMIT ?1)) AS failed_notices,
      (SELECT down_since FROM push_endpoint WHERE id = 1) AS endpoint_down_since,
      (SELECT up_since FROM push_endpoint WHERE id = 1) AS endpoint_up_since,
      (SELECT MIN(receipt_id) FROM receipts) AS oldest_receipt_id,
      (SELECT MAX(started_at) FROM archive_runs) AS last_archive_started_at,
      (SELECT finished_at FROM archive_runs ORDER BY started_at DESC LIMIT 1) AS last_archive_finished_at,
      (SELECT MAX(name) FROM d1_migrations) AS latest_migration`,
    HEALTH_COUNT_CAP,
  );
}
