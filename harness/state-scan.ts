/**
 * Reads every byte of a local state directory (what `--persist-to` or a harness's
 * resourcePersistencePath holds: each D1 shard's SQLite file and its WAL, R2's objects and their
 * keys, KV, the Workflows' instances) for a value in every form a store may keep it in, and says
 * where each copy is (docs/api.md#erasure: after an erasure no stored copy holds the app_user_id).
 *
 * A file's bytes are also read inflated when they are a raw deflate stream, as the archive's objects
 * are in R2 (src/storage/archive/objects.ts): a deflated copy shows no form of the value in its
 * bytes ({@link searchableBytes}).
 *
 * A SQLite database is read twice. Its bytes, like any file's, for every copy; and its live rows,
 * through SQLite itself on a copy of the database and its WAL, for the rows that hold the value
 * now, each BLOB inflated where it was deflated (a receipt's texts since migration 0022). SQLite keeps the bytes of deleted rows (free pages, the unused space of a page, the WAL's
 * older frames) until it happens to overwrite them, and local D1 lets a Worker neither zero them
 * (`PRAGMA secure_delete` is refused) nor VACUUM (docs/storage.md, "Erasure and freed bytes"):
 * so a copy in a database's bytes that no live row explains is reported as freed bytes, apart
 * from the live rows, which are the stored copies the service answers for.
 */
import { closeSync, copyFileSync, existsSync, mkdtempSync, openSync, readFileSync, readSync, readdirSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { DatabaseSync } from "node:sqlite";
import { inflateRawSync } from "node:zlib";

/** One way a store may keep the value: its bytes so written. */
export interface ScanForm {
  name: string;
  bytes: Buffer;
}

/** A copy found in a file's bytes. */
export interface ByteCopy {
  /** The file, relative to the scanned directory. */
  file: string;
  /** In the bytes the form names: the file's, or those it inflates to (a form ending in ", deflated"). */
  offset: number;
  form: string;
  /** Up to CONTEXT bytes either side, control bytes shown as `.`. */
  context: string;
}

/** A live row of a SQLite database that holds the value in one of its columns. */
export interface LiveRow {
  /** The database file, relative to the scanned directory. */
  database: string;
  table: string;
  /** The columns that hold it, with the form found in each. */
  columns: Record<string, string>;
  /** The row, each value as text (a blob as its bytes read as Latin-1). */
  row: Record<string, string | number | bigint | null>;
}

/** Says why a live row may hold the value (e.g. "the erasure's own event"), or undefined: a finding. */
export type Explain = (row: LiveRow) => string | undefined;

/** What a scan found. */
export interface StateScan {
  files: number;
  bytes: number;
  /** Copies in files that are no SQLite database: each one a finding. */
  fileCopies: ByteCopy[];
  /** Live rows that hold the value and nothing explains: each one a finding. */
  unexplainedRows: LiveRow[];
  /** Live rows that hold the value, with why they may. */
  explainedRows: (LiveRow & { why: string })[];
  /** Copies in a SQLite database's bytes (its file, WAL or shared memory), live or freed. */
  databaseCopies: ByteCopy[];
  /** The SQLite databases read row by row. */
  databases: number;
}

const SQLITE_MAGIC = Buffer.from("SQLite format 3\0", "latin1");
const CONTEXT = 40;
// A finding shows each value of its row up to this many characters.
const SHOWN_VALUE = 160;

/**
 * The forms a store may keep `value` in: raw (UTF-8, as SQLite TEXT, R2 and KV keep it),
 * URL-encoded (as a key in a URL path or query), form-encoded, JSON-escaped (inside a JSON
 * string), hex in both cases (how the operator scripts inline values into SQL), UTF-16LE (how V8
 * serialises a string that holds any character beyond Latin-1, e.g. a Workflow's state), and
 * base64 and base64url at each of the three alignments a value can take inside a longer encoded
 * text (the characters that the value's bytes alone decide).
 */
export function formsOf(value: string): ScanForm[] {
  const bytes = Buffer.from(value, "utf8");
  const forms: [string, Buffer][] = [
    ["raw", bytes],
    ["URL-encoded", Buffer.from(encodeURIComponent(value))],
    ["form-encoded", Buffer.from(new URLSearchParams({ v: value }).toString().slice(2))],
    ["JSON-escaped", Buffer.from(JSON.stringify(value).slice(1, -1))],
    ["hex", Buffer.from(bytes.toString("hex"))],
    ["HEX", Buffer.from(bytes.toString("hex").toUpperCase())],
    ["UTF-16LE", Buffer.from(value, "utf16le")],
    ["UTF-16LE JSON-escaped", Buffer.from(JSON.stringify(value).slice(1, -1), "utf16le")],
    ...[0, 1, 2].flatMap((shift): [string, Buffer][] => {
      const encoded = Buffer.concat([Buffer.alloc(shift), bytes]).toString("base64");
      const decided = encoded.slice(Math.ceil((8 * shift) / 6), Math.floor((8 * (shift + bytes.length)) / 6));
      return [
        [`base64 +${shift}`, Buffer.from(decided)],
        [`base64url +${shift}`, Buffer.from(decided.replaceAll("+", "-").replaceAll("/", "_"))],
      ];
    }),
  ];
  // One entry per distinct byte string: for a plain value several forms are the raw one.
  const seen = new Map<string, ScanForm>();
  for (const [name, form] of forms) if (!seen.has(form.toString("latin1"))) seen.set(form.toString("latin1"), { name, bytes: form });
  return [...seen.values()];
}

/**
 * Scans every file under `dir` for `value` in each of its forms (`formsOf`), and every live row
 * of every SQLite database there; `explain` says which live rows may hold it.
 */
export function scanState(dir: string, value: string, explain: Explain = () => undefined): StateScan {
  const forms = formsOf(value);
  const files = filesUnder(dir);
  const databases = files.filter((file) => isDatabase(file));
  const ofDatabase = new Set(databases.flatMap((file) => [file, `${file}-wal`, `${file}-shm`, `${file}-journal`]));
  const scan: StateScan = { files: files.length, bytes: 0, fileCopies: [], unexplainedRows: [], explainedRows: [], databaseCopies: [], databases: databases.length };
  for (const file of files) {
    const bytes = readIfThere(file);
    if (!bytes) continue;
    scan.bytes += bytes.length;
    if (ofDatabase.has(file)) {
      scan.databaseCopies.push(...copiesIn(bytes, forms, path.relative(dir, file)));
      continue;
    }
    for (const read of searchableBytes(bytes)) {
      const copies = copiesIn(read.bytes, forms, path.relative(dir, file));
      scan.fileCopies.push(...copies.map((copy) => ({ ...copy, form: `${copy.form}${read.suffix}` })));
    }
  }
  for (const database of databases) {
    for (const row of liveRows(database, forms)) {
      const found = { ...row, database: path.relative(dir, database) };
      const why = explain(found);
      if (why === undefined) scan.unexplainedRows.push(found);
      else scan.explainedRows.push({ ...found, why });
    }
  }
  return scan;
}

/** Bytes as a store may hold them, read one way: `suffix` is added to the name of a form found in them. */
export interface SearchableBytes {
  suffix: string;
  bytes: Buffer;
}

// Bytes a stream may inflate to before the scan stops reading it: far above an archive object.
const MAX_INFLATED = 256 * 1024 * 1024;

/**
 * Every way to read `bytes` for a value: as they are, and, when they are a whole raw deflate
 * stream (`deflate-raw`, how the archive stores an object, src/storage/archive/objects.ts), as
 * what they inflate to. Bytes that are no such stream fail to inflate and are read as they are
 * only; the store's own marker (an object's custom metadata) is not beside the bytes on disk, so
 * every file is tried. For any store's bytes: a file's, or a column's value.
 */
export function searchableBytes(bytes: Uint8Array): SearchableBytes[] {
  const stored = { suffix: "", bytes: Buffer.from(bytes) };
  try {
    return [stored, { suffix: ", deflated", bytes: inflateRawSync(bytes, { maxOutputLength: MAX_INFLATED }) }];
  } catch {
    return [stored];
  }
}

/** A scan in figures, and its findings: what a report shows. */
export interface ScanSummary {
  files: number;
  bytes: number;
  /** Live rows that may hold the value (`Explain`). */
  explainedRows: number;
  /** Copies in SQLite databases' bytes: the explained live rows' and freed ones. */
  databaseCopies: number;
  findings: string[];
}

/** `scan` in figures, with its findings. */
export function summarise(scan: StateScan): ScanSummary {
  return {
    files: scan.files,
    bytes: scan.bytes,
    explainedRows: scan.explainedRows.length,
    databaseCopies: scan.databaseCopies.length,
    findings: findings(scan),
  };
}

/** The findings of a scan, one line each: copies in plain files and live rows nothing explains. */
export function findings(scan: StateScan): string[] {
  return [
    ...scan.fileCopies.map((copy) => `${copy.file} @${copy.offset} (${copy.form}): ${copy.context}`),
    ...scan.unexplainedRows.map((row) => {
      const held = Object.entries(row.columns).map(([column, form]) => `${column}: ${form}`).join(", ");
      const values = Object.entries(row.row).map(([column, value]) => `${column}=${typeof value === "string" ? shown(value) : String(value)}`);
      return `${row.database} ${row.table} [${held}]: ${values.join(" ")}`;
    }),
  ];
}

/** The time in ms that a UUIDv7 (a receipt_id, an event_id) carries, or undefined for another value. */
export function uuidv7Time(value: unknown): number | undefined {
  if (typeof value !== "string" || !/^[0-9a-f]{8}-[0-9a-f]{4}-7/i.test(value)) return undefined;
  return parseInt(value.slice(0, 8) + value.slice(9, 13), 16);
}

// A running store may delete a file between the listing and the read: it then holds nothing.
function readIfThere(file: string): Buffer | undefined {
  try {
    return readFileSync(file);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw error;
  }
}

function filesUnder(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) return filesUnder(full);
    return entry.isFile() ? [full] : [];
  });
}

// A database file: SQLite's header, or a WAL beside it (local D1 keeps its main file nearly
// empty, and a database not yet checkpointed can be all WAL).
function isDatabase(file: string): boolean {
  if (/-(wal|shm|journal)$/.test(file)) return false;
  if (existsSync(`${file}-wal`)) return true;
  const head = Buffer.alloc(SQLITE_MAGIC.length);
  let fd: number;
  try {
    fd = openSync(file, "r");
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return false;
    throw error;
  }
  try {
    readSync(fd, head, 0, head.length, 0);
  } finally {
    closeSync(fd);
  }
  return head.equals(SQLITE_MAGIC);
}

function copiesIn(bytes: Buffer, forms: readonly ScanForm[], file: string): ByteCopy[] {
  const copies: ByteCopy[] = [];
  for (const form of forms) {
    for (let at = bytes.indexOf(form.bytes); at !== -1; at = bytes.indexOf(form.bytes, at + 1)) {
      const context = bytes.subarray(Math.max(0, at - CONTEXT), at + form.bytes.length + CONTEXT).toString("latin1").replace(/[\x00-\x1f\x7f-\xff]/g, ".");
      copies.push({ file, offset: at, form: form.name, context });
    }
  }
  return copies;
}

// The live rows of every table that hold a form in any column, read by SQLite from a copy of the
// database and its WAL (the store's own process may hold the originals open and write on).
function liveRows(database: string, forms: readonly ScanForm[]): Omit<LiveRow, "database">[] {
  const copyDir = mkdtempSync(path.join(tmpdir(), "state-scan-"));
  try {
    const copy = path.join(copyDir, "db.sqlite");
    copyFileSync(database, copy);
    if (existsSync(`${database}-wal`) && statSync(`${database}-wal`).size > 0) copyFileSync(`${database}-wal`, `${copy}-wal`);
    const db = new DatabaseSync(copy);
    try {
      const rows: Omit<LiveRow, "database">[] = [];
      const tables = db.prepare("SELECT name FROM sqlite_schema WHERE type = 'table' UNION ALL SELECT 'sqlite_schema'").all() as { name: string }[];
      for (const { name } of tables) rows.push(...rowsHolding(db, name, forms));
      return rows;
    } finally {
      db.close();
    }
  } finally {
    rmSync(copyDir, { recursive: true, force: true });
  }
}

function rowsHolding(db: DatabaseSync, table: string, forms: readonly ScanForm[]): Omit<LiveRow, "database">[] {
  const quoted = (name: string) => `"${name.replaceAll('"', '""')}"`;
  const columns = (db.prepare(`SELECT name FROM pragma_table_info(?)`).all(table) as { name: string }[]).map(({ name }) => name);
  if (columns.length === 0) return [];
  const anyForm = columns.flatMap((column) => forms.map((_, i) => `instr(CAST(${quoted(column)} AS BLOB), ?${i + 1}) > 0`)).join(" OR ");
  // A BLOB may be deflated (a receipt's texts, migration 0022): SQLite cannot search it inflated,
  // so every row with one is read and searched here.
  const anyBlob = columns.map((column) => `typeof(${quoted(column)}) = 'blob'`).join(" OR ");
  const found = db.prepare(`SELECT * FROM ${quoted(table)} WHERE ${anyForm} OR ${anyBlob}`).all(...forms.map((form) => form.bytes)) as Record<string, unknown>[];
  return found.flatMap((values) => {
    const held: Record<string, string> = {};
    const row: LiveRow["row"] = {};
    for (const column of columns) {
      const value = values[column];
      const text = typeof value === "string" ? Buffer.from(value, "utf8") : undefined;
      const reads = value instanceof Uint8Array ? searchableBytes(value) : text ? [{ suffix: "", bytes: text }] : [];
      for (const read of reads) {
        const form = forms.find((candidate) => read.bytes.includes(candidate.bytes));
        if (form) {
          held[column] = `${form.name}${read.suffix}`;
          break;
        }
      }
      // A BLOB is shown as what it inflates to, where it does.
      row[column] = typeof value === "string" ? value : reads.length > 0 ? reads.at(-1)!.bytes.toString("latin1") : (value as number | bigint | null);
    }
    return Object.keys(held).length > 0 ? [{ table, columns: held, row }] : [];
  });
}

function shown(text: string): string {
  const printable = text.replace(/[\x00-\x1f\x7f-\xff]/g, ".");
  return printable.length > SHOWN_VALUE ? `${printable.slice(0, SHOWN_VALUE)}…` : printable;
}

/**
 * What may still hold an erased app user's ID once their erasure completed (docs/api.md#erasure, docs/storage.md#personal-data):
 * the erasure's own `app_user.erased` event (its outbox or failed-notice row, until delivered and
 * for the feed's window), an earlier erasure's event still to deliver in the outbox (it tells the
 * app of that erasure), and the rows of receipts created after the erasure's instant, which are
 * the app user's anew. A row belongs to the receipt its `receipt_id` names, and a receipt_id is a
 * UUIDv7 whose time is the receipt's created_at. Anything else is a finding: a row of another
 * table, of an earlier erasure's event delivered or dead-lettered, of a receipt created at or
 * before the instant.
 */
export function afterErasure(erasure: { event_id: string; occurred_at: string }): Explain {
  const instant = Date.parse(erasure.occurred_at);
  return ({ table, row }) => {
    const erasureEvent = typeof row.payload === "string" && eventType(row.payload) === "app_user.erased";
    if (erasureEvent && row.event_id === erasure.event_id) return "the erasure's own app_user.erased event";
    if (erasureEvent && table === "notice_outbox" && row.delivered_at === null) return "an earlier erasure's app_user.erased event, still to deliver";
    const created = uuidv7Time(row.receipt_id);
    return created !== undefined && created > instant ? "a receipt created after the erasure's instant" : undefined;
  };
}

function eventType(payload: string): unknown {
  try {
    return (JSON.parse(payload) as { type?: unknown }).type;
  } catch {
    return undefined;
  }
}

/**
 * Spans of the archive's rename of its first layout (src/storage/archive/legacy.ts) made before
 * `before` (ms): an R2 call on a first-layout key names the app user by their ID, since that key
 * does, and lands in the trace store as every binding call's key does. The rename runs before any
 * erasure may start, so these spans are older than the erasure and out of its reach; they age out
 * with the traces' retention (docs/storage.md#archive). Any other span naming the user is a finding.
 */
export function firstLayoutRename(appUserId: string, before: number): Explain {
  const firstLayoutKey = `receipts/${encodeURIComponent(appUserId)}/`;
  return ({ table, row }) => {
    const early = typeof row.start_ms === "number" || typeof row.start_ms === "bigint" ? Number(row.start_ms) < before : false;
    const r2Call = typeof row.name === "string" && row.name.startsWith("r2_");
    const named = typeof row.attributes === "string" && row.attributes.includes(firstLayoutKey);
    return table === "spans" && early && r2Call && named ? "a span of the first layout's rename, before any erasure" : undefined;
  };
}
