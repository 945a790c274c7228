/**
 * Every statement of the archive's move on a shard's own tables (migrations 0008, 0009, 0017): the
 * page of receipts it copies, the record of a page in flight, the batch that removes what it
 * copied, and the run's record, whose sums are what `npm run archive -- status` reports: the shard
 * keeps no row per archived receipt or object, so that what stays in D1 does not grow with the
 * archive. The values
 * of a page go in as one JSON parameter, read with json_each, so that a batch stays a handful of
 * statements whatever the page's size. This file stays free of Workers types.
 */
import { auditedRemoval } from "../audit.ts";
import { fenced } from "../fences.ts";
import { createdEventKept, eventUndelivered, keepBodiesOfArchived } from "../outbox/statements.ts";
import { enclose, statement, type Statement } from "../statement.ts";
import { STORED_COLUMNS } from "../stored-body.ts";
import { recordOwners } from "./owners.ts";

/** A receipt of a page as the move copied it: where its line went and what fences it. */
export interface CopiedReceipt {
  receipt_id: string;
  created_at: string;
  /** The app user's pseudonym, which names them in erasure fences. */
  user_key: string;
  object_key: string;
  /** The length in bytes of its line in the object. */
  bytes: number;
}

/**
 * What a page's batch removes: the receipts it copied, and of those whose created event is in the
 * outbox, the receipt as that event carries it (src/storage/stored-body.ts `receiptAsPushed`).
 */
export interface MovedReceipts {
  copied: readonly CopiedReceipt[];
  kept: readonly { receipt_id: string; body: string }[];
}

/** A line a page writes or wrote, as its page's record keeps it until the page is settled. */
export type PageLine = Pick<CopiedReceipt, "receipt_id" | "created_at" | "user_key" | "object_key">;

/** A page's record (archive_pages): the lines its attempts wrote or were about to, and the objects they found absent. */
export interface PageRecord {
  lines: PageLine[];
  new_objects: string[];
}

/** An archived receipt that is gone, and the object whose line still holds it until purged. */
export interface Tombstone {
  receipt_id: string;
  object_key: string;
}

/**
 * The smallest receipt_id of the instant `cutoff`: a receipt_id (a UUIDv7, its time in its first
 * 48 bits) below it was made before the cutoff, so a page is a range of the primary key and reads
 * only the rows it copies.
 */
export function firstIdAt(cutoff: Date): string {
  const hex = cutoff.getTime().toString(16).padStart(12, "0");
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-0000-0000-000000000000`;
}

/**
 * Up to `limit` receipts made before the cutoff whose receipt_id is above `after`, in order, but
 * none with an event not yet delivered: it waits for a later run. Rows: the receipt's columns,
 * its texts as stored (src/storage/stored-body.ts), and `created_event_kept`, 1 while its
 * created event is in the outbox, whose row then keeps the receipt ({@link settlePage}).
 */
export function pageToArchive(beforeId: string, after: string, limit: number): Statement {
  return statement(
    `SELECT receipt_id, chain_id, client_id, app_user_id, created_at, ${STORED_COLUMNS.join(", ")},
      ${createdEventKept("receipts.receipt_id")} AS created_event_kept FROM receipts
    WHERE receipt_id > ?1 AND receipt_id < ?2 AND NOT ${eventUndelivered("receipts.receipt_id")}
    ORDER BY receipt_id LIMIT ?3`,
    after,
    beforeId,
    limit,
  );
}

/** The receipts among `copied` that an erasure's fence covers: the move leaves them to the erasure. */
export function fencedAmong(copied: readonly Pick<CopiedReceipt, "receipt_id" | "created_at" | "user_key">[]): Statement {
  return statement(
    `SELECT value ->> 'receipt_id' AS receipt_id FROM json_each(?1)
    WHERE ${fenced("value ->> 'user_key'", "value ->> 'created_at'")}`,
    JSON.stringify(copied),
  );
}

/** The record of the page `page`, from an earlier attempt that did not end it. Rows: `lines`, `new_objects` (JSON). */
export function pageRecord(page: string): Statement {
  return statement("SELECT lines, new_objects FROM archive_pages WHERE page = ?1", page);
}

/**
 * The page's record before its first put in R2: every line it may have written, its earlier
 * attempts' included, and the objects found absent (see {@link settlePage}).
 */
export function recordPage(page: string, runId: string, record: PageRecord): Statement {
  return statement(
    `INSERT INTO archive_pages (page, run_id, lines, new_objects) VALUES (?1, ?2, ?3, ?4)
    ON CONFLICT (page) DO UPDATE SET lines = excluded.lines, new_objects = excluded.new_objects`,
    page,
    runId,
    JSON.stringify(record.lines),
    JSON.stringify(record.new_objects),
  );
}

// The lines of a page's record not settled yet: their receipt's row is still in the shard with no
// tombstone (a later page copies it again). A line whose row is gone was moved (its owner row
// stands for it) or has its tombstone.
const UNSETTLED_LINES = `(SELECT json_group_array(json(line.value)) FROM json_each(archive_pages.lines) AS line
  WHERE EXISTS (SELECT 1 FROM receipts WHERE receipt_id = line.value ->> 'receipt_id')
    AND NOT EXISTS (SELECT 1 FROM archive_tombstones WHERE receipt_id = line.value ->> 'receipt_id'))`;

// The page's record loses its settled lines and the objects counted; left without lines, it goes.
function settleRecord(page: string): Statement[] {
  return [
    statement(`UPDATE archive_pages SET lines = ${UNSETTLED_LINES}, new_objects = '[]' WHERE page = ?1`, page),
    statement("DELETE FROM archive_pages WHERE page = ?1 AND lines = '[]'", page),
  ];
}

// A copied receipt no erasure's fence covers: the row the batch removes, if it is still there.
// (An operator's replay of its failed event between the page's read and this batch is not waited
// for: that replay then finds the receipt gone, as after a delete.)
const KEEP_ROW = fenced("copied.value ->> 'user_key'", "copied.value ->> 'created_at'");
const MOVABLE = `EXISTS (SELECT 1 FROM receipts WHERE receipts.receipt_id = copied.value ->> 'receipt_id') AND NOT ${KEEP_ROW}`;

/**
 * The batch that ends a page, one transaction, after every object of the page was written and
 * read back: the run's tally (the receipts it removes and their lines' bytes, exact whatever ran
 * before; the objects its attempts created, `record.new_objects`), a tombstone for each line of
 * `record` whose receipt a delete or an erasure removed (since the page was read, or since an
 * earlier attempt of the page wrote it) or that a fence now covers (its line must not stay), the
 * removal of the rest of `copied`, with their owner rows recorded just before and their bodies
 * (`kept`) kept for the event feed in their created events' rows (while in the outbox), and the
 * page's record settled. The tombstones' statement returns the new ones, {@link Tombstone}s; the
 * removal returns the receipt_ids it removed.
 */
export function settlePage(runId: string, pageId: string, { copied, kept }: MovedReceipts, record: PageRecord, now: string): Statement[] {
  const page = JSON.stringify(copied);
  // The rows the batch removes: their owners are recorded from them just before, so that delete
  // answers for a moved receipt as for a live one (src/storage/archive/owners.ts).
  const removed = statement(`SELECT copied.value ->> 'receipt_id' FROM json_each(?1) AS copied WHERE NOT ${KEEP_ROW}`, page);
  return [
    statement(
      `UPDATE archive_runs SET
        receipts = receipts + (SELECT COUNT(*) FROM json_each(?2) AS copied WHERE ${MOVABLE}),
        bytes = bytes + (SELECT COALESCE(SUM(copied.value ->> 'bytes'), 0) FROM json_each(?2) AS copied WHERE ${MOVABLE}),
        objects = objects + ?3
      WHERE run_id = ?1`,
      runId,
      page,
      new Set(record.new_objects).size,
    ),
    statement(
      `INSERT INTO archive_tombstones (receipt_id, object_key, deleted_at)
      SELECT line.value ->> 'receipt_id', line.value ->> 'object_key', ?2 FROM json_each(?1) AS line
      LEFT JOIN receipts ON receipts.receipt_id = line.value ->> 'receipt_id'
      WHERE (receipts.receipt_id IS NULL AND ${auditedRemoval("line.value ->> 'receipt_id'")})
        OR (receipts.receipt_id IS NOT NULL AND ${fenced("line.value ->> 'user_key'", "receipts.created_at")})
      ON CONFLICT (receipt_id) DO NOTHING
      RETURNING receipt_id, object_key`,
      JSON.stringify(record.lines),
      now,
    ),
    recordOwners(removed),
    keepBodiesOfArchived(removed, kept),
    enclose(removed, (ids) => `DELETE FROM receipts WHERE receipt_id IN (${ids}) RETURNING receipt_id`),
    ...settleRecord(pageId),
  ];
}

/**
 * Up to `limit` records that other runs left (see {@link settlePage}): of a run that stopped for
 * good (not finished a day after it started, as {@link runInFlight} counts it), or finished with
 * lines unsettled; none of `runId`, the run now starting, nor of a run still in flight. Rows:
 * `page`, `run_id`, `lines`, `new_objects` (JSON).
 */
export function leftoverPages(runId: string, now: Date, limit: number): Statement {
  return statement(
    `SELECT page, run_id, lines, new_objects FROM archive_pages WHERE run_id <> ?1 AND run_id NOT IN
      (SELECT run_id FROM archive_runs WHERE finished_at IS NULL AND started_at > ?2)
    ORDER BY page LIMIT ?3`,
    runId,
    new Date(now.getTime() - 24 * 60 * 60 * 1000).toISOString(),
    limit,
  );
}

/** The run's record, once however often its first step runs. */
export function beginRun(runId: string, cutoff: string, startedAt: string): Statement {
  return statement(
    "INSERT INTO archive_runs (run_id, cutoff, started_at) VALUES (?1, ?2, ?3) ON CONFLICT (run_id) DO NOTHING",
    runId,
    cutoff,
    startedAt,
  );
}

/** The run's end, and what it did. */
export function finishRun(runId: string, finishedAt: string): Statement {
  return statement(
    "UPDATE archive_runs SET finished_at = coalesce(finished_at, ?2) WHERE run_id = ?1 RETURNING receipts, objects, bytes",
    runId,
    finishedAt,
  );
}

/**
 * One row: `due`, the receipts still in the shard made before `beforeId`'s instant; `archived`,
 * the receipts the moves removed less the archived receipts deleted since (tombstones); `objects`
 * and `bytes`, the objects the moves created and the bytes of the lines they moved (neither less
 * what deletes and erasures took out again); the last run's columns (`last_run_id` null when
 * none).
 */
export function archiveStatus(beforeId: string): Statement {
  return statement(
    `SELECT
      (SELECT COUNT(*) FROM receipts WHERE receipt_id < ?1) AS due,
      (SELECT COALESCE(SUM(receipts), 0) FROM archive_runs) - (SELECT COUNT(*) FROM archive_tombstones) AS archived,
      (SELECT COALESCE(SUM(objects), 0) FROM archive_runs) AS objects,
      (SELECT COALESCE(SUM(bytes), 0) FROM archive_runs) AS bytes,
      last.run_id AS last_run_id, last.cutoff AS last_cutoff, last.started_at AS last_started_at,
      last.finished_at AS last_finished_at, last.receipts AS last_receipts
    FROM (SELECT 1) LEFT JOIN (SELECT * FROM archive_runs ORDER BY started_at DESC LIMIT 1) AS last`,
    beforeId,
  );
}
