/**
 * The archive's move on one shard (docs/storage.md "Archive"): receipts made before the cutoff go
 * from the shard to R2, a page a step. A page's objects are each read, merged, put and read back
 * before one D1 batch removes the page's rows, so a step cut off anywhere leaves every receipt in
 * D1, in R2, or in both, never in neither; the step then runs again, the merge finds its lines
 * already there (the object's text is sorted and has each receipt once), and nothing is doubled.
 *
 * A page records the lines it is about to write before its first put (archive_pages), so that an
 * attempt that fails after some puts leaves no line that a later attempt cannot see: the page's
 * receipts are read from D1 again, and one deleted in between is no longer among them.
 *
 * Races, and why none loses or keeps what it must not:
 * - A POS delete between a page's read and its batch removes the row, with an audit record: the
 *   batch finds the row gone and audited and records a tombstone, and the step purges the line.
 * - An erasure: a page skips receipts an erasure's fence covers (src/storage/fences.ts); one whose
 *   fence came after that check was copied, so the batch leaves its row to the erasure and
 *   tombstones it, and the step purges the line at once. An erasure that reaches the archive after
 *   its fences finds every line copied before them in R2, and no move adds one after them.
 * - Two moves of one shard at once (the cron's and an operator's): the objects' conditional puts
 *   serialise their writes, and a row the other move removed has no audit record, so it is not
 *   taken for deleted.
 * - Adds: a receipt is made with the current time, never before the cutoff.
 *
 * This file stays free of Workers types, like the erasure's steps it follows.
 */
import { importAuditHashKey, pseudonymWith } from "../../shared/audit-hash-key.ts";
import { runAtOnce, type JobShard, type StepRunner } from "../steps.ts";
import { receiptAsPushed, storedTexts, type StoredColumns } from "../stored-body.ts";
import { archiveCutoff, archiveObjectKey, type ArchivedReceipt } from "./layout.ts";
import { lineBytes, readObject, rewriteObject, writeObject, type ArchiveBucket } from "./objects.ts";
import { markPurged } from "./tombstones.ts";
import {
  beginRun,
  fencedAmong,
  finishRun,
  firstIdAt,
  pageRecord,
  pageToArchive,
  recordPage,
  leftoverPages,
  settlePage,
  type CopiedReceipt,
  type MovedReceipts,
  type PageRecord,
  type Tombstone,
} from "./statements.ts";

/**
 * Receipts per page. A page writes at most this many objects, each a get, a put and a get back,
 * and runs ten D1 statements in four queries (five more, and one query, when a line is purged):
 * far inside a step's limits on subrequests and D1 queries.
 */
export const ARCHIVE_PAGE = 200;

/**
 * Pages per run (200,000 receipts): below the 1,024 steps an instance may take. A run that stops
 * here says so (`complete: false`); the Workflow then starts the next part.
 */
export const ARCHIVE_MAX_PAGES = 1000;

// Objects written at once: a page's R2 calls run a few at a time, not all 600 together.
const WRITES_AT_ONCE = 8;

/** What a run of the move did. */
export interface ArchiveRun {
  run_id: string;
  shard: string;
  /** Receipts made before this instant were moved. */
  cutoff: string;
  receipts: number;
  objects: number;
  bytes: number;
  pages: number;
  /** False when the run stopped at its pages' limit, perhaps with receipts left before the cutoff. */
  complete: boolean;
}

/** How a run goes: its ID (its row in archive_runs), its steps and its clock. */
export interface ArchiveOptions {
  runId: string;
  /** Pages before the run stops, incomplete: ARCHIVE_MAX_PAGES unless a test says fewer. */
  maxPages?: number;
  /** The archive age (ARCHIVE_AFTER_DAYS), from which {@link archiveCutoff} fixes the cutoff. */
  archiveAfterMs: number;
  steps?: StepRunner;
  now?: () => Date;
}

/**
 * Moves the shard's receipts made before the cutoff ({@link archiveCutoff} at `now`) to `bucket`.
 * Steps: `begin` (fixes the cutoff, records the run, settles the page records of runs that
 * stopped for good), `move page <n>`, `finish`.
 *
 * @param hashKey AUDIT_HASH_KEY's bytes, which name an app user in erasure fences.
 */
export async function archiveShard(
  shard: JobShard,
  bucket: ArchiveBucket,
  hashKey: Uint8Array,
  { runId, archiveAfterMs, maxPages = ARCHIVE_MAX_PAGES, steps = runAtOnce, now = () => new Date() }: ArchiveOptions,
): Promise<ArchiveRun> {
  const { cutoff } = await steps("begin", async () => {
    const startedAt = now();
    const cutoff = archiveCutoff(startedAt, archiveAfterMs).toISOString();
    const [leftovers] = (await shard.run([leftoverPages(runId, startedAt, LEFTOVER_PAGES), beginRun(runId, cutoff, startedAt.toISOString())])) as [LeftoverPage[]];
    for (const leftover of leftovers) await settleLeftover(shard, bucket, leftover, now);
    return { cutoff };
  });
  const key = await importAuditHashKey(hashKey);
  const page: PageContext = { shard, bucket, runId, beforeId: firstIdAt(new Date(cutoff)), userKey: (id) => pseudonymWith(key, id), now };
  let after = "";
  let pages = 0;
  let complete = false;
  while (pages < maxPages && !complete) {
    const moved = await steps(`move page ${pages}`, () => movePage(page, after));
    pages += 1;
    after = moved.last;
    complete = moved.done;
  }
  const totals = await steps("finish", async () => {
    const [[row]] = (await shard.run([finishRun(runId, now().toISOString())])) as [[{ receipts: number; objects: number; bytes: number }]];
    return row;
  });
  return { run_id: runId, shard: shard.name, cutoff, ...totals, pages, complete };
}

interface PageContext {
  shard: JobShard;
  bucket: ArchiveBucket;
  runId: string;
  beforeId: string;
  userKey: (appUserId: string) => Promise<string>;
  now: () => Date;
}

/**
 * One page: record what it is about to write, copy, verify, then remove and settle in one batch.
 * Returns where the next page starts. Run again after a failure, the page reads its record: the
 * lines its earlier attempts may have left in R2 are settled with its own, so that one whose
 * receipt was deleted or erased in between gets its tombstone and is purged, and the objects
 * they created are counted.
 */
async function movePage({ shard, bucket, runId, beforeId, userKey, now }: PageContext, after: string): Promise<{ last: string; done: boolean }> {
  const pageId = `${runId} ${after}`;
  const [rows, [earlier]] = (await shard.run([pageToArchive(beforeId, after, ARCHIVE_PAGE), pageRecord(pageId)])) as [
    ArchivedRow[],
    { lines: string; new_objects: string }[],
  ];
  const last = rows.at(-1)?.receipt_id ?? after;
  const done = rows.length < ARCHIVE_PAGE;
  const record: PageRecord = earlier ? { lines: JSON.parse(earlier.lines), new_objects: JSON.parse(earlier.new_objects) } : { lines: [], new_objects: [] };
  if (rows.length === 0) return earlier ? settle(shard, bucket, runId, pageId, NOTHING_MOVED, record, now, { last, done }) : { last, done };

  const keys = new Map<string, string>();
  for (const { app_user_id } of rows) if (!keys.has(app_user_id)) keys.set(app_user_id, await userKey(app_user_id));
  // A created event still in the outbox keeps its receipt as pushed there once the row goes.
  const read = await Promise.all(
    rows.map(async (row) => ({ row, receipt: await archivedLine(row), pushed: row.created_event_kept === 1 ? await receiptAsPushed(row) : null })),
  );
  const candidates = read.map(({ row, receipt, pushed }) => ({
    receipt,
    pushed,
    copied: {
      receipt_id: row.receipt_id,
      created_at: row.created_at,
      user_key: keys.get(row.app_user_id)!,
      object_key: archiveObjectKey(keys.get(row.app_user_id)!, row.chain_id, row.receipt_id, shard.name),
      bytes: lineBytes(receipt),
    } satisfies CopiedReceipt,
  }));
  const [fencedRows] = (await shard.run([fencedAmong(candidates.map(({ copied }) => copied))])) as [{ receipt_id: string }[]];
  const fenced = new Set(fencedRows.map(({ receipt_id }) => receipt_id));
  const moving = candidates.filter(({ copied }) => !fenced.has(copied.receipt_id));
  if (moving.length === 0) return earlier ? settle(shard, bucket, runId, pageId, NOTHING_MOVED, record, now, { last, done }) : { last, done };

  const byObject = groupBy(moving, ({ copied }) => copied.object_key);
  const held = await inGroups([...byObject.keys()], (objectKey) => readObject(bucket, objectKey));
  const written = new Set(record.lines.map(({ receipt_id }) => receipt_id));
  const lines = moving.map(({ copied: { receipt_id, created_at, user_key, object_key } }) => ({ receipt_id, created_at, user_key, object_key }));
  const merged: PageRecord = {
    lines: [...record.lines, ...lines.filter(({ receipt_id }) => !written.has(receipt_id))],
    new_objects: [...new Set([...record.new_objects, ...held.filter(({ existing }) => existing === null).map(({ key }) => key)])],
  };
  // Before the first put: a failure after it leaves the record for the next attempt to settle.
  await shard.run([recordPage(pageId, runId, merged)]);
  await inGroups(held, (object) => writeObject(bucket, object, (receipts) => [...receipts, ...byObject.get(object.key)!.map(({ receipt }) => receipt)]));
  const kept = moving.flatMap(({ copied, pushed }) => (pushed === null ? [] : [{ receipt_id: copied.receipt_id, body: pushed }]));
  return settle(shard, bucket, runId, pageId, { copied: moving.map(({ copied }) => copied), kept }, merged, now, { last, done });
}

/** A page's record that another run left, as {@link leftoverPages} reads it. */
interface LeftoverPage {
  page: string;
  run_id: string;
  lines: string;
  new_objects: string;
}

// Records a run's start settles: a run that stopped for good leaves one, that of the page it failed on.
const LEFTOVER_PAGES = 2;

// Settles a record another run left as its page would have, in that run's tally: its lines of
// receipts deleted or erased since get their tombstone and are purged; of the objects it found
// absent, those in R2 now count as that run's (its puts that failed created none).
async function settleLeftover(shard: JobShard, bucket: ArchiveBucket, leftover: LeftoverPage, now: () => Date): Promise<void> {
  const found = await inGroups(JSON.parse(leftover.new_objects) as string[], async (key) => ((await bucket.get(key)) ? [key] : []));
  const record: PageRecord = { lines: JSON.parse(leftover.lines), new_objects: found.flat() };
  await settle(shard, bucket, leftover.run_id, leftover.page, NOTHING_MOVED, record, now, null);
}

// Ends a page: its batch, then the purge of the lines that got a tombstone.
async function settle<T>(
  shard: JobShard,
  bucket: ArchiveBucket,
  runId: string,
  pageId: string,
  moved: MovedReceipts,
  record: PageRecord,
  now: () => Date,
  result: T,
): Promise<T> {
  const at = now().toISOString();
  const results = await shard.run(settlePage(runId, pageId, moved, record, at));
  const tombstones = results[1] as Tombstone[];
  if (tombstones.length > 0) await purgeLines(shard, bucket, tombstones, at);
  return result;
}

// The lines of receipts that are gone, out of their objects now rather than at the next sweep:
// for a fenced receipt the erasure may already have passed the archive.
async function purgeLines(shard: JobShard, bucket: ArchiveBucket, tombstones: readonly Tombstone[], at: string): Promise<void> {
  const byObject = groupBy(tombstones, ({ object_key }) => object_key);
  await inGroups([...byObject], ([objectKey, gone]) => {
    const ids = new Set(gone.map(({ receipt_id }) => receipt_id));
    return rewriteObject(bucket, objectKey, (held) => held.filter(({ receipt_id }) => !ids.has(receipt_id)));
  });
  await shard.run([markPurged(tombstones.map(({ receipt_id }) => receipt_id), new Date(at))]);
}

// A page that removes no receipt: a leftover's, or one whose receipts are all fenced or gone.
const NOTHING_MOVED: MovedReceipts = { copied: [], kept: [] };

// The line's fields in one order, whatever order the row's columns came in: the same receipt
// always makes the same bytes, its texts as the till sent them (inflated where add deflated
// them). A receipt of our own shape has no format or model (NULL columns).
async function archivedLine(row: ArchivedRow): Promise<ArchivedReceipt> {
  const { receipt_id, chain_id, client_id, app_user_id, created_at, format } = row;
  const { body, mapped } = await storedTexts(row);
  const line: ArchivedReceipt = { receipt_id, chain_id, client_id, app_user_id, created_at, body };
  return format === null || mapped === null ? line : { ...line, format, mapped };
}

// A row of pageToArchive: the format columns are NULL for a receipt of our own shape.
type ArchivedRow = Pick<ArchivedReceipt, "receipt_id" | "chain_id" | "client_id" | "app_user_id" | "created_at"> & StoredColumns & { created_event_kept: number };

function groupBy<T>(items: readonly T[], keyOf: (item: T) => string): Map<string, T[]> {
  const groups = new Map<string, T[]>();
  for (const item of items) {
    const key = keyOf(item);
    groups.set(key, [...(groups.get(key) ?? []), item]);
  }
  return groups;
}

async function inGroups<T, R>(items: readonly T[], work: (item: T) => Promise<R>): Promise<R[]> {
  const done: R[] = [];
  for (let start = 0; start < items.length; start += WRITES_AT_ONCE) {
    done.push(...(await Promise.all(items.slice(start, start + WRITES_AT_ONCE).map(work))));
  }
  return done;
}
