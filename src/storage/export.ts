/**
 * The export of everything the service holds of one app user (docs/api.md#export,
 * docs/storage.md#exports): their receipts, live and archived, on every shard, and the audit
 * records that name them, written as NDJSON to the archive's bucket in chunks under
 * `exports/<job_id>/`, which names nobody, then a summary line.
 *
 * A consistent cut: the export's instant is fixed after its hold stands on every shard, and it
 * reads only once every add made before the instant has committed (an add's events commit within
 * EVENT_COMMIT_SECONDS of their event_id, or never: migration 0018). So it holds exactly the
 * receipts made at or before the instant and not deleted by then:
 * - an add made after the instant is left out (its created_at is later);
 * - a delete that commits after the instant is read back from the copy its batch made while the
 *   hold stood (`export_copies`), and an archived line deleted then waits for its purge until the
 *   hold goes (the tombstone says when it was deleted);
 * - a receipt the archive's move takes to R2 while the export runs is read once: the shard's
 *   page records what it read (`export_seen`), and the archive pass skips those; a step run
 *   again drops what its failed attempt recorded, or a receipt deleted or moved since would be lost.
 *
 * Each step is bounded (a number of shards, rows and bytes), returns counts, never a key or an
 * ID of the user, and writes what it read to its own chunk object. This file stays free of
 * Workers types: the soak and the tests run it on Node and in workerd alike.
 */
import { importAuditHashKey, pseudonymWith } from "../shared/audit-hash-key.ts";
import { archiveUserPrefix, shardOfObjectKey, type ArchivedReceipt } from "./archive/layout.ts";
import { readReceipts, type ArchiveBucket } from "./archive/objects.ts";
import { exportsOfUser, forgetJobs, jobsMadeBefore } from "./app-user-jobs.ts";
import { liveOwned } from "./ownership.ts";
import { statement, type Statement } from "./statement.ts";
import { STORED_COLUMNS, storedTexts, type StoredBytes, type StoredColumns } from "./stored-body.ts";
import type { JobShard, StepRunner } from "./steps.ts";
import { userReceiptsPage } from "./user-receipts.ts";

/** What the export needs of the archive's bucket: its own chunks, and the user's archived objects. */
export interface ExportBucket {
  put(key: string, value: string): Promise<unknown>;
  get: ArchiveBucket["get"];
  list(options: { prefix: string; limit?: number; cursor?: string }): Promise<{ objects: { key: string }[]; truncated: boolean; cursor?: string }>;
  delete(keys: string | string[]): Promise<void>;
}

/** The export's values every step needs. */
export interface ExportUser {
  /** The app_user_id: only ever a bound value of D1, never in a key, a prefix or a step result. */
  id: string;
  /** Their keyed hash, which names them in holds and in the archive's keys. */
  pseudonym: string;
  job_id: string;
  /** The instant of the cut. */
  occurred_at: string;
}

/** What an export found, its job's output and its summary line. */
export interface ExportSummary {
  job_id: string;
  occurred_at: string;
  receipts: number;
  archived_receipts: number;
  /** Receipts per chain_id. */
  by_chain: Record<string, number>;
  audit_records: number;
  archive_read: boolean;
}

/** Where an export's chunks lie: under a prefix named by the job alone. */
export function exportPrefix(jobId: string): string {
  return `exports/${jobId}/`;
}

/** The chunk a step writes; the number orders the chunks as the file reads. */
export function exportChunkKey(jobId: string, chunk: number): string {
  return `${exportPrefix(jobId)}${String(chunk).padStart(6, "0")}.ndjson`;
}

/** Shards a step visits at most: two statements each, far below an invocation's 1,000 queries. */
export const EXPORT_STEP_SHARDS = 50;
/** Rows a shard's page reads at most. */
export const EXPORT_PAGE_ROWS = 200;
/** A step stops once it read this many receipts or bytes: each body is at most 64 KiB. */
export const EXPORT_STEP_ROWS = 1000;
export const EXPORT_STEP_BYTES = 4 * 1024 * 1024;
/** Objects of the archive a step reads at most: a get apiece. */
export const EXPORT_ARCHIVE_OBJECTS = 100;

/** The export's hold of its app user on a shard: written on every shard before its instant. */
export function holdForExport(jobId: string, userKey: string): Statement {
  return statement("INSERT INTO export_holds (job_id, user_key) VALUES (?1, ?2) ON CONFLICT DO NOTHING", jobId, userKey);
}

/**
 * SQL that is true while an export's hold of the app user `userKeyParam` stands: a delete's copy
 * is made, and an archived line's purge waits.
 */
export function exportHeld(userKeyParam: string): string {
  return `EXISTS (SELECT 1 FROM export_holds WHERE user_key = ${userKeyParam})`;
}

/**
 * In delete's batch, before the receipt's row goes: a copy of the receipt as stored (its texts
 * deflated where add deflated them, src/storage/stored-body.ts) for every export that holds its
 * app user (`userKey`), made only where the row is there with the owner's fields and no
 * erasure's fence covers it (`liveOwned`, the condition of delete's own statements), at the
 * deletion's instant.
 * Without a hold it writes nothing: one probe of export_holds' primary key.
 */
export function copyForExports(owner: { receipt_id: string; client_id: string; chain_id: string; app_user_id: string }, userKey: string, deletedAt: string): Statement {
  return statement(
    `INSERT INTO export_copies (job_id, receipt_id, deleted_at, line, deflated)
    SELECT h.job_id, r.receipt_id, ?3, json_object('receipt_id', r.receipt_id, 'chain_id', r.chain_id,
      'client_id', r.client_id, 'app_user_id', r.app_user_id, 'created_at', r.created_at, 'body', r.body, 'format', r.format, 'mapped', r.mapped), r.deflated
    FROM export_holds AS h JOIN receipts AS r ON r.receipt_id = ?1
    WHERE h.user_key = ?2 AND ${liveOwned({ receiptId: "?1", clientId: "?4", chainId: "?5", appUserId: "?6", userKey: "?2" })}
    ON CONFLICT DO NOTHING`,
    owner.receipt_id,
    userKey,
    deletedAt,
    owner.client_id,
    owner.chain_id,
    owner.app_user_id,
  );
}

/** Up to `limit` rows of what an export left on a shard: its hold, copies and reads. Each returns a row per row gone. */
export function releaseExport(jobId: string, limit: number): Statement[] {
  return [
    statement("DELETE FROM export_holds WHERE job_id = ?1 RETURNING 1", jobId),
    statement("DELETE FROM export_copies WHERE rowid IN (SELECT rowid FROM export_copies WHERE job_id = ?1 LIMIT ?2) RETURNING 1", jobId, limit),
    statement(
      "DELETE FROM export_seen WHERE (job_id, receipt_id) IN (SELECT job_id, receipt_id FROM export_seen WHERE job_id = ?1 LIMIT ?2) RETURNING 1",
      jobId,
      limit,
    ),
  ];
}

/** What an erasure takes of the app user's exports on a shard: the copies their holds made, before the holds go. */
export function eraseExportCopies(userKey: string): Statement {
  return statement("DELETE FROM export_copies WHERE job_id IN (SELECT job_id FROM export_holds WHERE user_key = ?1) RETURNING 1", userKey);
}

/** What an erasure takes of the app user's exports on a shard: their holds. */
export function eraseExportHolds(userKey: string): Statement {
  return statement("DELETE FROM export_holds WHERE user_key = ?1 RETURNING 1", userKey);
}

/**
 * Runs the export of `user` over every shard and the archive, with its named steps, and returns
 * its summary, which its last chunk holds too. `settle` waits until every add made before the
 * instant has committed: a Workflow's sleep, or a plain wait.
 */
export async function exportAppUser(
  user: Omit<ExportUser, "occurred_at" | "pseudonym">,
  shards: readonly JobShard[],
  hashKey: Uint8Array,
  bucket: ExportBucket,
  { steps, settle, now = () => new Date() }: { steps: StepRunner; settle: (until: number) => Promise<void>; now?: () => Date },
): Promise<ExportSummary> {
  const key = await importAuditHashKey(hashKey);
  const pseudonym = await pseudonymWith(key, user.id);
  for (let from = 0; from < shards.length; from += EXPORT_STEP_SHARDS) {
    const part = shards.slice(from, from + EXPORT_STEP_SHARDS);
    await steps(`hold ${part[0]!.name}`, async () => {
      await Promise.all(part.map((shard) => shard.run([holdForExport(user.job_id, pseudonym)])));
      return part.length;
    });
  }
  const occurredAt = await steps("begin", async () => now().toISOString());
  await settle(Date.parse(occurredAt));
  const full: ExportUser = { ...user, pseudonym, occurred_at: occurredAt };
  const summary: ExportSummary = { job_id: user.job_id, occurred_at: occurredAt, receipts: 0, archived_receipts: 0, by_chain: {}, audit_records: 0, archive_read: true };
  let chunk = 0;
  const tally = (read: Read<ShardCursor | string>) => {
    summary.receipts += read.receipts;
    summary.audit_records += read.audit;
    for (const [chain, count] of Object.entries(read.by_chain)) summary.by_chain[chain] = (summary.by_chain[chain] ?? 0) + count;
  };

  const shardPass = async (phase: ShardPhase) => {
    let cursor: ShardCursor | null = { shard: 0, after: "" };
    while (cursor) {
      const at: ShardCursor = cursor;
      const number = (chunk += 1);
      const read = await steps(`${phase} ${shards[at.shard]!.name} ${at.after || "start"}`, () => readShards(phase, shards, full, at, bucket, number));
      tally(read);
      cursor = read.next;
    }
  };
  // The file's order (docs/api.md#export): every receipt, live then deleted since the instant then
  // archived, then the audit records, then the summary. The archive pass comes after the shards'
  // receipts, whose pages record what they read for it to skip.
  await shardPass("receipts");
  await shardPass("copies");
  for (let cursor: string | null = ""; cursor !== null; ) {
    const at: string = cursor;
    const number = (chunk += 1);
    const read = await steps(`archive ${number}`, () => readArchivePage(shards, full, at, bucket, number));
    tally(read);
    summary.archived_receipts += read.receipts;
    cursor = read.next;
  }
  await shardPass("audit");
  const last = (chunk += 1);
  const erased = await steps("summary", async () => {
    await bucket.put(exportChunkKey(user.job_id, last), `${JSON.stringify({ summary })}\n`);
    // An erasure of the user since the instant fenced the first shard before it takes their
    // exports: checked after the last chunk, so that either it finds this one whole, or this finds it.
    const [fences] = (await shards[0]!.run([erasedSince(pseudonym, occurredAt)])) as [unknown[]];
    if (fences.length > 0) await deleteExport(bucket, user.job_id);
    return fences.length > 0;
  });
  for (let from = 0; from < shards.length; from += EXPORT_STEP_SHARDS) {
    const part = shards.slice(from, from + EXPORT_STEP_SHARDS);
    for (let round = 0; ; round += 1) {
      const more = await steps(`release ${part[0]!.name} ${round}`, async () => {
        const rows = await Promise.all(part.map((shard) => shard.run(releaseExport(user.job_id, RELEASE_ROWS))));
        return rows.some((shard) => shard.some((gone) => gone.length >= RELEASE_ROWS));
      });
      if (!more) break;
    }
  }
  if (erased) throw new ExportErased();
  return summary;
}

/** An export whose app user was erased while it ran: its file is gone, and so is the job's result. */
export class ExportErased extends Error {
  constructor() {
    super("the app user was erased while the export ran: its file is gone");
  }
}

/** Deletes an export's file, chunk by chunk, a list's page at a time. */
export async function deleteExport(bucket: Pick<ExportBucket, "list" | "delete">, jobId: string): Promise<void> {
  for (;;) {
    const { objects } = await bucket.list({ prefix: exportPrefix(jobId), limit: 1000 });
    if (objects.length === 0) return;
    await bucket.delete(objects.map(({ key }) => key));
  }
}

// An erasure of the user whose instant is at or after `instant`. Rows: one per fence.
function erasedSince(userKey: string, instant: string): Statement {
  return statement("SELECT 1 FROM erasure_fences WHERE user_key = ?1 AND instant >= ?2", userKey, instant);
}

const RELEASE_ROWS = 5000;

/** The passes over the shards: receipts live now, those deleted since the instant, audit records. */
type ShardPhase = "receipts" | "copies" | "audit";

/** Where a pass over the shards goes on: a shard's index, and the last key read there. */
interface ShardCursor {
  [key: string]: number | string;
  shard: number;
  after: string;
}

/** What a step read: counts, and where the next one goes on (null: the pass is done). */
interface Read<Next extends ShardCursor | string> {
  [key: string]: number | Record<string, number> | Next | null;
  receipts: number;
  audit: number;
  by_chain: Record<string, number>;
  next: Next | null;
}

// One step of a pass: shard pages from `at` on, until its bounds, written to chunk `number`.
async function readShards(phase: ShardPhase, shards: readonly JobShard[], user: ExportUser, at: ShardCursor, bucket: ExportBucket, number: number): Promise<Read<ShardCursor>> {
  const lines: string[] = [];
  const read: Read<ShardCursor> = { receipts: 0, audit: 0, by_chain: {}, next: null };
  let bytes = 0;
  let cursor: ShardCursor | null = at;
  for (let visited = 0; cursor && visited < EXPORT_STEP_SHARDS && lines.length < EXPORT_STEP_ROWS && bytes < EXPORT_STEP_BYTES; visited += 1) {
    const shard = shards[cursor.shard]!;
    const rows = (await shard.run(pageOf(phase, user, cursor.after))).at(-1) as PageRow[];
    for (const row of rows) {
      if (phase === "audit") {
        lines.push(auditLine(row as AuditRow));
        read.audit += 1;
      } else {
        const stored = phase === "copies" ? { ...(JSON.parse((row as CopyRow).line) as Omit<ReceiptRow, "deflated">), deflated: (row as CopyRow).deflated } : (row as ReceiptRow);
        const receipt = { ...stored, ...(await storedTexts(stored)) };
        lines.push(receiptLine(receipt, false));
        read.receipts += 1;
        read.by_chain[receipt.chain_id] = (read.by_chain[receipt.chain_id] ?? 0) + 1;
      }
      bytes += lines.at(-1)!.length;
    }
    const last = rows.at(-1);
    if (rows.length === EXPORT_PAGE_ROWS && last) cursor = { shard: cursor.shard, after: String(last.page_key) };
    else cursor = cursor.shard + 1 < shards.length ? { shard: cursor.shard + 1, after: "" } : null;
  }
  read.next = cursor;
  await bucket.put(exportChunkKey(user.job_id, number), lines.map((line) => `${line}\n`).join(""));
  return read;
}

/** A receipt's row as the shard holds it: an archived receipt's fields, its texts as stored. */
type ReceiptRow = Omit<ArchivedReceipt, "body" | "format" | "mapped"> & StoredColumns;
/** A delete's copy: the row's columns as JSON, and its deflated texts apart (migration 0022). */
interface CopyRow {
  line: string;
  deflated: StoredBytes | null;
}
interface AuditRow {
  at: string;
  action: string;
  receipt_id: string | null;
  chain_id: string | null;
  client_id: string;
  request_id: string | null;
}
type PageRow = (ReceiptRow | CopyRow | AuditRow) & { page_key: string | number };

// A page of one pass on one shard, as a batch whose last statement returns the rows. The
// receipts' page records what it read in the same transaction, for the archive pass.
function pageOf(phase: ShardPhase, user: ExportUser, after: string): Statement[] {
  if (phase === "receipts") {
    const page = userReceiptsPage(`receipt_id, chain_id, client_id, app_user_id, created_at, ${STORED_COLUMNS.join(", ")}, receipt_id AS page_key`, "?4", "?3");
    return [
      // Marks past the cursor are an earlier attempt's of this step, whose lines never reached the
      // file: kept, they would hide a receipt deleted or moved since from the copies and the archive.
      statement("DELETE FROM export_seen WHERE job_id = ?1 AND receipt_id > ?2", user.job_id, after),
      statement(
        `INSERT OR IGNORE INTO export_seen (job_id, receipt_id) SELECT ?5, receipt_id FROM (${page})`,
        user.id,
        user.occurred_at,
        after,
        EXPORT_PAGE_ROWS,
        user.job_id,
      ),
      statement(page, user.id, user.occurred_at, after, EXPORT_PAGE_ROWS),
    ];
  }
  if (phase === "copies") {
    return [
      statement(
        `SELECT line, deflated, receipt_id AS page_key FROM export_copies
        WHERE job_id = ?1 AND deleted_at > ?2 AND json_extract(line, '$.created_at') <= ?2 AND receipt_id > ?3
          AND NOT EXISTS (SELECT 1 FROM export_seen WHERE job_id = ?1 AND receipt_id = export_copies.receipt_id)
        ORDER BY receipt_id LIMIT ?4`,
        user.job_id,
        user.occurred_at,
        after,
        EXPORT_PAGE_ROWS,
      ),
    ];
  }
  return [
    statement(
      `SELECT at, action, receipt_id, chain_id, client_id, request_id, audit_id AS page_key FROM audit_log
      WHERE app_user = ?1 AND at <= ?2 AND audit_id > ?3 ORDER BY audit_id LIMIT ?4`,
      user.id,
      user.occurred_at,
      after === "" ? 0 : Number(after),
      EXPORT_PAGE_ROWS,
    ),
  ];
}

/**
 * A receipt's line: its IDs, chain, client and created_at, the receipt in our model, and for one
 * added in another format that format and the original. Stored JSON texts are spliced as they
 * are, on one line ({@link onOneLine}).
 */
function receiptLine(row: Omit<ArchivedReceipt, "format" | "mapped"> & { format?: string | null; mapped?: string | null }, archived: boolean): string {
  const head = JSON.stringify({ receipt_id: row.receipt_id, chain_id: row.chain_id, client_id: row.client_id, app_user_id: row.app_user_id, created_at: row.created_at, archived });
  const model = onOneLine(row.mapped ?? row.body);
  const original = row.format ? `,"format":${JSON.stringify(row.format)},"original":${onOneLine(row.body)}` : "";
  return `${head.slice(0, -1)},"receipt":${model}${original}}`;
}

/**
 * A stored JSON text on one line of the NDJSON file, the same JSON value byte for byte but its
 * line breaks: a till may send its body pretty-printed, and a JSON text holds a CR or LF only as
 * white space between tokens (inside a string it must be escaped), so a space keeps the value.
 * U+2028 and U+2029, which JSON allows raw only inside a string, are written as their escapes:
 * readers that split on every Unicode line break (Python's `str.splitlines`) would cut the line.
 */
function onOneLine(json: string): string {
  return json.replace(/[\r\n]/g, " ").replace(/[\u2028\u2029]/g, (separator) => `\\u${separator.charCodeAt(0).toString(16)}`);
}

function auditLine(row: AuditRow): string {
  return JSON.stringify({ audit: { at: row.at, action: row.action, receipt_id: row.receipt_id, chain_id: row.chain_id, client_id: row.client_id, request_id: row.request_id } });
}

// A page of the user's archived objects after `cursor`: their lines made at or before the
// instant, but those the shards' pages read and those deleted by then.
async function readArchivePage(shards: readonly JobShard[], user: ExportUser, cursor: string, bucket: ExportBucket, number: number): Promise<Read<string>> {
  const listing = await bucket.list({ prefix: archiveUserPrefix(user.pseudonym), limit: EXPORT_ARCHIVE_OBJECTS, ...(cursor && { cursor }) });
  const byShard = new Map<string, ArchivedReceipt[]>();
  for (const { key } of listing.objects) {
    const receipts = await readReceipts(bucket, key);
    if (!receipts) continue;
    const lines = receipts.filter(({ created_at }) => created_at <= user.occurred_at);
    byShard.set(shardOfObjectKey(key), [...(byShard.get(shardOfObjectKey(key)) ?? []), ...lines]);
  }
  const kept: ArchivedReceipt[] = [];
  for (const [name, lines] of byShard) {
    const shard = shards.find((each) => each.name === name);
    const ids = JSON.stringify(lines.map(({ receipt_id }) => receipt_id));
    const [skip] = shard
      ? ((await shard.run([
          statement(
            `SELECT value AS receipt_id FROM json_each(?1)
            WHERE EXISTS (SELECT 1 FROM export_seen WHERE job_id = ?2 AND receipt_id = value)
              OR EXISTS (SELECT 1 FROM archive_tombstones WHERE receipt_id = value AND deleted_at <= ?3)`,
            ids,
            user.job_id,
            user.occurred_at,
          ),
        ])) as [{ receipt_id: string }[]])
      : [[]];
    const skipped = new Set(skip.map(({ receipt_id }) => receipt_id));
    kept.push(...lines.filter(({ receipt_id }) => !skipped.has(receipt_id)));
  }
  const read: Read<string> = { receipts: kept.length, audit: 0, by_chain: {}, next: listing.truncated ? (listing.cursor ?? null) : null };
  for (const { chain_id } of kept) read.by_chain[chain_id] = (read.by_chain[chain_id] ?? 0) + 1;
  await bucket.put(exportChunkKey(user.job_id, number), kept.map((line) => `${receiptLine(line, true)}\n`).join(""));
  return read;
}

/**
 * An erasure's `erase exports` step, once its fences stand on every shard: deletes the file of
 * every export of the app user (app_user_jobs on the first shard, by keyed hash), so that none is
 * readable after the erasure; an export still running finds the fence and deletes its own.
 * Returns how many exports it found.
 */
export async function eraseExports(first: JobShard, bucket: Pick<ExportBucket, "list" | "delete">, userKey: string, steps: StepRunner): Promise<number> {
  return steps("erase exports", async () => {
    const [jobs] = (await first.run([exportsOfUser(userKey)])) as [{ job_id: string }[]];
    for (const { job_id } of jobs) await deleteExport(bucket, job_id);
    return jobs.length;
  });
}

/** Jobs one run of the cron's purge forgets at most: two R2 calls per export. */
export const EXPIRED_JOBS_PER_RUN = 20;

/**
 * The cron's purge on the first shard: the jobs made before `cutoff` (EXPORT_KEPT_DAYS ago), an
 * export's file first, then their records. Two D1 queries. Returns how many jobs it forgot.
 */
export async function purgeExpiredJobs(first: JobShard, bucket: Pick<ExportBucket, "list" | "delete">, cutoff: Date): Promise<number> {
  const [jobs] = (await first.run([jobsMadeBefore(cutoff.toISOString(), EXPIRED_JOBS_PER_RUN)])) as [{ job_id: string; kind: string }[]];
  if (jobs.length === 0) return 0;
  for (const { job_id, kind } of jobs) if (kind === "export") await deleteExport(bucket, job_id);
  await first.run([forgetJobs(jobs.map(({ job_id }) => job_id))]);
  return jobs.length;
}
