/**
 * `npm run bench:bytes`: the bytes a receipt takes in a shard as stored, the figure docs/scale.md
 * prices D1's storage with. The tables of `migrations/`, applied in order to a SQLite database of
 * node:sqlite (the engine D1 runs, 4,096-byte pages), take ROWS receipts of each kind; the receipts
 * table and its indexes are then summed page by page from `dbstat`, so that a row that leaves part
 * of its page empty counts the whole page, as it does on disk.
 *
 * Kinds: the body as text, as rows stored before migration 0022 hold it; the same body deflated,
 * as add stores it now (src/storage/stored-body.ts); a body whose line items vary from receipt to
 * receipt (the bench's repeat one sentence, which flatters deflate); and a DR Retail receipt with
 * its model, deflated together.
 */
import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { DatabaseSync } from "node:sqlite";
import { v7 as uuidv7 } from "uuid";
import { drRetailReceipt, receiptBody } from "../harness/bodies.ts";
import { mapDrRetail } from "../src/api/dr-retail-mapping.ts";
import { drRetailFormat } from "../src/shared/dr-retail-profiles.ts";
import { archiveText } from "../src/storage/archive/layout.ts";
import { putObject } from "../src/storage/archive/objects.ts";
import { deflatedTexts, type ReceiptTexts } from "../src/storage/stored-body.ts";

const ROWS = 20_000;
/** Archive objects written, each of RECEIPTS_PER_OBJECT receipts: an app user's in a chain and month (docs/scale.md §1). */
const OBJECTS = 2_000;
const RECEIPTS_PER_OBJECT = 4;
// The bench's receipt: receiptBody(2 KiB), 2,120 bytes of JSON.
const BODY_BYTES = 2 * 1024;
const MIGRATIONS = path.join(import.meta.dirname, "..", "migrations");

interface Kind {
  name: string;
  /** The texts of receipt `n`, and whether add stores them deflated. */
  texts: (n: number) => ReceiptTexts & { format: string | null };
  deflate: boolean;
}

const PRODUCTS = [
  "Organic whole milk", "Rye sourdough bread", "Free-range eggs", "Greek yoghurt", "Cheddar, mature",
  "Bananas, Fairtrade", "Apples, Ingrid Marie", "Ground coffee, dark roast", "Oat drink, barista", "Butter, salted",
  "Pasta, penne rigate", "Tomatoes, cherry", "Salmon fillet", "Chicken thighs", "Potatoes, fast boiling",
  "Dish soap, lemon", "Toilet paper, 8 rolls", "Crisp bread", "Orange juice, not from concentrate", "Dark chocolate 70 %",
];

const benchBody = receiptBody(BODY_BYTES);
const dr = JSON.stringify(drRetailReceipt(BODY_BYTES).body);
const KINDS: Kind[] = [
  { name: "text (rows before 0022)", texts: () => ({ body: benchBody, mapped: null, format: null }), deflate: false },
  { name: "deflated, the bench's receipt", texts: () => ({ body: benchBody, mapped: null, format: null }), deflate: true },
  { name: "deflated, varied line items", texts: (n) => ({ body: variedBody(n), mapped: null, format: null }), deflate: true },
  {
    name: "deflated, DR Retail with its model",
    texts: () => ({ body: dr, mapped: JSON.stringify(mapDrRetail(dr, "DR Retail v1.1")), format: drRetailFormat("1.1") }),
    deflate: true,
  },
];

console.log(`Bytes a receipt takes in D1 (receipts table and its indexes, ${ROWS.toLocaleString("en")} rows, pages counted)`);
for (const kind of KINDS) {
  const sample = kind.texts(0);
  const stored = kind.deflate ? (await deflatedTexts(sample)).byteLength : sample.body.length + (sample.mapped?.length ?? 0);
  console.log(`${kind.name.padEnd(38)} texts ${String(sample.body.length + (sample.mapped?.length ?? 0)).padStart(5)} B, stored ${String(stored).padStart(5)} B, a receipt ${(await bytesPerReceipt(kind)).toFixed(1).padStart(7)} B`);
}

console.log(`Bytes a receipt takes in R2 (objects of ${RECEIPTS_PER_OBJECT} receipts, as the archive puts them)`);
for (const kind of KINDS.filter(({ deflate }) => deflate)) {
  console.log(`${kind.name.padEnd(38)} a receipt ${(await archivedBytesPerReceipt(kind)).toFixed(1).padStart(7)} B`);
}

async function archivedBytesPerReceipt(kind: Kind): Promise<number> {
  let stored = 0;
  const bucket = {
    put: async (_key: string, value: Uint8Array) => {
      stored += value.byteLength;
      return { etag: "" };
    },
  };
  for (let object = 0; object < OBJECTS; object += 1) {
    const appUserId = crypto.randomUUID();
    const lines = Array.from({ length: RECEIPTS_PER_OBJECT }, (_, i) => {
      const { format, ...texts } = kind.texts(object * RECEIPTS_PER_OBJECT + i);
      const line = { receipt_id: uuidv7(), chain_id: "chain-nord", client_id: "pos-acme-01", app_user_id: appUserId, created_at: new Date().toISOString(), body: texts.body };
      return format === null ? line : { ...line, format, mapped: texts.mapped! };
    });
    await putObject(bucket, "object", archiveText(lines), { etagDoesNotMatch: "*" });
  }
  return stored / (OBJECTS * RECEIPTS_PER_OBJECT);
}

async function bytesPerReceipt(kind: Kind): Promise<number> {
  const db = new DatabaseSync(":memory:");
  for (const file of readdirSync(MIGRATIONS).filter((name) => name.endsWith(".sql")).sort()) {
    db.exec(readFileSync(path.join(MIGRATIONS, file), "utf8"));
  }
  const insert = db.prepare(
    `INSERT INTO receipts (receipt_id, chain_id, client_id, app_user_id, body, format, mapped, deflated, created_at)
    VALUES (?, 'chain-nord', 'pos-acme-01', ?, ?, ?, ?, ?, ?)`,
  );
  const rows = await Promise.all(
    Array.from({ length: ROWS }, async (_, n) => {
      const texts = kind.texts(n);
      return kind.deflate ? { ...texts, body: "", mapped: null, deflated: await deflatedTexts(texts) } : { ...texts, deflated: null };
    }),
  );
  const before = receiptPages(db);
  db.exec("BEGIN");
  for (const row of rows) insert.run(uuidv7(), crypto.randomUUID(), row.body, row.format, row.mapped, row.deflated, new Date().toISOString());
  db.exec("COMMIT");
  const grown = receiptPages(db) - before;
  db.close();
  return grown / ROWS;
}

// The receipts table's pages and its indexes', in bytes.
function receiptPages(db: DatabaseSync): number {
  const names = (db.prepare("SELECT name FROM sqlite_schema WHERE tbl_name = 'receipts' AND type IN ('table', 'index')").all() as { name: string }[]).map(
    ({ name }) => name,
  );
  const sizes = db.prepare(`SELECT name, SUM(pgsize) AS bytes FROM dbstat WHERE name IN (SELECT value FROM json_each(?)) GROUP BY name`).all(JSON.stringify(names)) as {
    bytes: number;
  }[];
  return sizes.reduce((sum, { bytes }) => sum + bytes, 0);
}

// A receipt of the bench's size whose lines differ from receipt to receipt: products, SKUs,
// quantities and prices drawn from `n`, as a shop's receipts differ.
function variedBody(n: number): string {
  type Line = { description: string; sku: string; quantity: number; unit_price: number; total: number; vat_rate: number };
  const body = JSON.parse(benchBody) as { line_items: Line[]; total: number; payments: { amount: number }[] };
  const model = body.line_items[0]!;
  body.line_items = [];
  for (let index = 0; JSON.stringify(body).length < benchBody.length; index += 1) {
    const seed = (n * 7919 + index * 104_729) >>> 0;
    const quantity = (seed % 4) + 1;
    const unitPrice = 99 + (seed % 4_900);
    body.line_items.push({
      ...model,
      description: `${PRODUCTS[seed % PRODUCTS.length]} ${(seed % 9) + 1}${["00 g", " l", " st", "-pack"][seed % 4]}`,
      sku: `SKU-${String((seed * 2_654_435_761) % 100_000_000).padStart(8, "0")}`,
      quantity,
      unit_price: unitPrice,
      total: quantity * unitPrice,
      vat_rate: seed % 2 === 0 ? 7 : 19,
    });
  }
  body.total = body.line_items.reduce((sum, item) => sum + item.total, 0);
  body.payments = [{ ...body.payments[0]!, amount: body.total }];
  return JSON.stringify(body);
}
