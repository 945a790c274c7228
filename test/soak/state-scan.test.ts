/**
 * The erasure's proof by reading every byte (harness/state-scan.ts): the forms it
 * looks for, a copy in a plain file with its offset, a live row of a database held in its WAL,
 * a deleted row's freed bytes kept apart from the live rows, a live row that holds it only inside
 * a deflated receipt, and a live row an erasure explains.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { DatabaseSync } from "node:sqlite";
import { deflateRawSync } from "node:zlib";
import { afterEach, describe, expect, it } from "vitest";
import { afterErasure, findings, formsOf, scanState, searchableBytes, uuidv7Time } from "../../harness/state-scan.ts";
import { deflatedTexts } from "../../src/storage/stored-body.ts";

const USER = 'scan "me"/now';
const dirs: string[] = [];
const open: DatabaseSync[] = [];

afterEach(() => {
  for (const db of open.splice(0)) db.close();
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function stateDir(): string {
  const dir = mkdtempSync(path.join(tmpdir(), "state-scan-test-"));
  dirs.push(dir);
  return dir;
}

// A database in WAL mode, left open so that its rows stay in the WAL as a running store's do.
function walDatabase(file: string): DatabaseSync {
  const db = new DatabaseSync(file);
  open.push(db);
  db.exec("PRAGMA journal_mode = WAL; PRAGMA wal_autocheckpoint = 0");
  db.exec("CREATE TABLE notice_outbox (event_id TEXT PRIMARY KEY, receipt_id TEXT NOT NULL, payload TEXT NOT NULL)");
  return db;
}

// A UUIDv7 (as a receipt_id) whose time is `ms`.
function uuidv7At(ms: number): string {
  const hex = ms.toString(16).padStart(12, "0");
  return `${hex.slice(0, 8)}-${hex.slice(8)}-7000-8000-000000000001`;
}

describe("docs/storage.md#personal-data the state scan reads every file for an app_user_id", () => {
  it("looks for the raw, URL-encoded, form-encoded, JSON-escaped, hex and UTF-16 forms, each once", () => {
    const forms = Object.fromEntries(formsOf(USER).map(({ name, bytes }) => [name, bytes]));
    expect(Object.fromEntries(Object.entries(forms).filter(([name]) => !name.startsWith("base64")).map(([name, bytes]) => [name, bytes.toString("latin1")]))).toEqual({
      raw: USER,
      "URL-encoded": "scan%20%22me%22%2Fnow",
      "form-encoded": "scan+%22me%22%2Fnow",
      "JSON-escaped": 'scan \\"me\\"/now',
      hex: "7363616e20226d65222f6e6f77",
      HEX: "7363616E20226D65222F6E6F77",
      "UTF-16LE": Buffer.from(USER, "utf16le").toString("latin1"),
      "UTF-16LE JSON-escaped": Buffer.from('scan \\"me\\"/now', "utf16le").toString("latin1"),
    });
    expect(formsOf("plain-user").map(({ name }) => name).filter((name) => !name.startsWith("base64"))).toEqual(["raw", "hex", "HEX", "UTF-16LE"]);
  });

  it("finds the value base64-encoded inside a longer text, whatever its alignment", () => {
    const dir = stateDir();
    for (const prefix of ["", "a", "ab"]) {
      writeFileSync(path.join(dir, `blob${prefix.length}`), Buffer.from(`{"x":"${prefix}${USER}!"}`).toString("base64"));
    }
    const copies = scanState(dir, USER).fileCopies;
    expect(copies.map(({ file }) => file).sort()).toEqual(["blob0", "blob1", "blob2"]);
    expect(copies.every(({ form }) => form.startsWith("base64 +"))).toBe(true);
  });

  it("a copy in a plain file is a finding, with its file, offset and form", () => {
    const dir = stateDir();
    writeFileSync(path.join(dir, "blob"), `receipts/${encodeURIComponent(USER)}/c1`);
    const scan = scanState(dir, USER);
    expect(scan.fileCopies).toEqual([{ file: "blob", offset: 9, form: "URL-encoded", context: `receipts/${encodeURIComponent(USER)}/c1` }]);
    expect(findings(scan)).toHaveLength(1);
  });

  it("a copy only in a deflated file, as the archive stores an object, is a finding once inflated, with its form and its offset in the inflated bytes", () => {
    const dir = stateDir();
    const line = `${JSON.stringify({ receipt_id: "r1", app_user_id: USER, body: "{}" })}\n`;
    const deflated = deflateRawSync(Buffer.from(line.repeat(20)));
    expect(deflated.includes(Buffer.from(JSON.stringify(USER).slice(1, -1)))).toBe(false);
    writeFileSync(path.join(dir, "blob"), deflated);
    const copies = scanState(dir, USER).fileCopies;
    expect(copies).toHaveLength(20);
    expect(copies[0]).toMatchObject({ file: "blob", offset: line.indexOf(JSON.stringify(USER).slice(1, -1)), form: "JSON-escaped, deflated" });
  });

  it("reads bytes that are no deflate stream as they are only", () => {
    expect(searchableBytes(Buffer.from(`{"app_user_id":"${USER}"}`)).map(({ suffix }) => suffix)).toEqual([""]);
    expect(searchableBytes(deflateRawSync("x")).map(({ suffix, bytes }) => [suffix, bytes.toString()])).toEqual([
      ["", deflateRawSync("x").toString()],
      [", deflated", "x"],
    ]);
  });

  it("a live row held in a WAL is a finding; a deleted row's bytes are counted apart, as freed", () => {
    const dir = stateDir();
    const db = walDatabase(path.join(dir, "shard.sqlite"));
    const payload = JSON.stringify({ type: "receipt.created", app_user_id: USER });
    db.prepare("INSERT INTO notice_outbox VALUES (?, ?, ?)").run("e1", "r1", payload);
    db.prepare("INSERT INTO notice_outbox VALUES (?, ?, ?)").run("e2", "r2", JSON.stringify({ app_user_id: `${USER}` }));
    db.prepare("DELETE FROM notice_outbox WHERE event_id = 'e2'").run();

    const scan = scanState(dir, USER);
    expect(scan.fileCopies).toEqual([]);
    expect(scan.unexplainedRows).toEqual([
      { database: "shard.sqlite", table: "notice_outbox", columns: { payload: "JSON-escaped" }, row: { event_id: "e1", receipt_id: "r1", payload } },
    ]);
    // Both rows' bytes, the deleted one's among them, are in the WAL.
    expect(scan.databaseCopies.filter(({ file }) => file === "shard.sqlite-wal").length).toBeGreaterThanOrEqual(2);
  });

  it("a live row holding the value only inside a receipt's deflated texts is a finding, shown inflated", async () => {
    const dir = stateDir();
    const db = walDatabase(path.join(dir, "shard.sqlite"));
    db.exec("CREATE TABLE receipts (receipt_id TEXT PRIMARY KEY, body TEXT NOT NULL, format TEXT, mapped TEXT, deflated BLOB) STRICT");
    const body = JSON.stringify({ total: 1, customer: { email: USER }, note: "x".repeat(200) });
    const mapped = JSON.stringify({ total: 1, metadata: { email: USER } });
    const deflated = await deflatedTexts({ body, mapped });
    expect(Buffer.from(deflated).includes(Buffer.from(USER))).toBe(false);
    db.prepare("INSERT INTO receipts VALUES (?, '', 'dr-retail/v1.1', NULL, ?)").run("r1", deflated);
    db.prepare("INSERT INTO receipts VALUES (?, '', NULL, NULL, ?)").run("r2", await deflatedTexts({ body: '{"total":2}', mapped: null }));

    const scan = scanState(dir, USER);
    expect(scan.unexplainedRows).toEqual([
      {
        database: "shard.sqlite",
        table: "receipts",
        columns: { deflated: "JSON-escaped, deflated" },
        row: { receipt_id: "r1", body: "", format: "dr-retail/v1.1", mapped: null, deflated: Buffer.from(`${mapped}\n${body}`).toString("latin1") },
      },
    ]);
    // Bytes alone hide it: no copy in the database's bytes.
    expect(scan.databaseCopies).toEqual([]);
  });

  it("after an erasure, its own app_user.erased event and receipts created after its instant are explained; an earlier receipt is not", () => {
    const dir = stateDir();
    const db = walDatabase(path.join(dir, "shard.sqlite"));
    const erasure = { event_id: "019ab000-0000-7000-8000-000000000001", occurred_at: "2026-11-25T10:00:00.000Z" };
    const instant = Date.parse(erasure.occurred_at);
    // Receipt IDs made 1 ms before and after the instant, and one made in its millisecond.
    const [before, at, after] = [uuidv7At(instant - 1), uuidv7At(instant), uuidv7At(instant + 1)];
    expect([before, at, after].map(uuidv7Time)).toEqual([instant - 1, instant, instant + 1]);
    const event = (type: string) => JSON.stringify({ type, app_user_id: USER });
    db.prepare("INSERT INTO notice_outbox VALUES (?, ?, ?)").run(erasure.event_id, erasure.event_id, event("app_user.erased"));
    db.prepare("INSERT INTO notice_outbox VALUES (?, ?, ?)").run("e-after", after, event("receipt.created"));
    db.prepare("INSERT INTO notice_outbox VALUES (?, ?, ?)").run("e-before", before, event("receipt.created"));
    db.prepare("INSERT INTO notice_outbox VALUES (?, ?, ?)").run("e-at", at, event("receipt.created"));

    const scan = scanState(dir, USER, afterErasure(erasure));
    expect(scan.explainedRows.map(({ row, why }) => [row.event_id, why])).toEqual([
      [erasure.event_id, "the erasure's own app_user.erased event"],
      ["e-after", "a receipt created after the erasure's instant"],
    ]);
    expect(scan.unexplainedRows.map(({ row }) => row.event_id).sort()).toEqual(["e-at", "e-before"]);
  });

  it("after an erasure, an earlier erasure's app_user.erased still to deliver is explained; one delivered or dead-lettered is not", () => {
    const dir = stateDir();
    const db = new DatabaseSync(path.join(dir, "shard.sqlite"));
    open.push(db);
    db.exec(`CREATE TABLE notice_outbox (event_id TEXT PRIMARY KEY, receipt_id TEXT NOT NULL, payload TEXT NOT NULL, delivered_at TEXT);
      CREATE TABLE failed_notices (event_id TEXT PRIMARY KEY, receipt_id TEXT NOT NULL, payload TEXT NOT NULL)`);
    const erasure = { event_id: "019ab000-0000-7000-8000-000000000009", occurred_at: "2026-11-25T10:00:00.000Z" };
    const erased = JSON.stringify({ type: "app_user.erased", app_user_id: USER });
    const outbox = db.prepare("INSERT INTO notice_outbox VALUES (?, ?, ?, ?)");
    outbox.run(erasure.event_id, erasure.event_id, erased, null);
    outbox.run("e-waiting", "e-waiting", erased, null);
    outbox.run("e-delivered", "e-delivered", erased, "2026-11-25T09:59:00.000Z");
    db.prepare("INSERT INTO failed_notices VALUES (?, ?, ?)").run("e-dead", "e-dead", erased);

    const scan = scanState(dir, USER, afterErasure(erasure));
    expect(scan.explainedRows.map(({ row, why }) => [row.event_id, why])).toEqual([
      [erasure.event_id, "the erasure's own app_user.erased event"],
      ["e-waiting", "an earlier erasure's app_user.erased event, still to deliver"],
    ]);
    expect(scan.unexplainedRows.map(({ row }) => row.event_id).sort()).toEqual(["e-dead", "e-delivered"]);
  });
});
