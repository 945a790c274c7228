/**
 * docs/storage.md#personal-data: the map of personal data (src/storage/personal-data.ts) classifies
 * every column of every table and view the migrations make, and every binding of both Workers'
 * configs, so that a new place for an app user's ID or a receipt cannot arrive unnoticed by the
 * erasure. The schema is the migrations applied in order to an empty SQLite database, as D1 runs them.
 */
import { readFileSync, readdirSync } from "node:fs";
import path from "node:path";
import { DatabaseSync } from "node:sqlite";
import { describe, expect, it } from "vitest";
import { readConfigFile } from "../../scripts/lib/config.ts";
import { ERASURE_STEPS } from "../../src/storage/erasure-statements.ts";
import { BINDINGS, D1_TABLES, NOT_PERSONAL, type ColumnClass } from "../../src/storage/personal-data.ts";

const ROOT = path.resolve(import.meta.dirname, "../..");
const MIGRATIONS = path.join(ROOT, "migrations");

/** An empty database with every migration applied, in order. */
function migrated(): DatabaseSync {
  const db = new DatabaseSync(":memory:");
  for (const file of readdirSync(MIGRATIONS).filter((name) => name.endsWith(".sql")).sort()) {
    db.exec(readFileSync(path.join(MIGRATIONS, file), "utf8"));
  }
  return db;
}

/** Every table and view of `db`, by name, with its columns. */
function schemaOf(db: DatabaseSync): Map<string, string[]> {
  const tables = db.prepare("SELECT name FROM sqlite_schema WHERE type IN ('table', 'view') AND name NOT LIKE 'sqlite_%' ORDER BY name").all() as { name: string }[];
  return new Map(tables.map(({ name }) => [name, (db.prepare("SELECT name FROM pragma_table_info(?)").all(name) as { name: string }[]).map((column) => column.name)]));
}

/** What the map leaves unclassified in a schema, as `table` or `table.column`. */
function unclassified(schema: Map<string, string[]>): string[] {
  const mapped = D1_TABLES as Record<string, { columns: Record<string, ColumnClass> }>;
  return [...schema].flatMap(([table, columns]) =>
    mapped[table] ? columns.filter((column) => !(column in mapped[table]!.columns)).map((column) => `${table}.${column}`) : [table],
  );
}

/** The bindings a wrangler config declares, by the name its code reads. */
function bindingsOf(config: string): string[] {
  const text = JSON.stringify(readConfigFile(path.join(ROOT, config)));
  return [...text.matchAll(/"(?:binding|name)":"([A-Z][A-Z0-9_]*)"/g)].map((match) => match[1]!);
}

describe("docs/storage.md#personal-data: the map of personal data", () => {
  it("classifies every column of every table and view the migrations make, and names none that is gone", () => {
    const schema = schemaOf(migrated());
    expect(unclassified(schema)).toEqual([]);
    const stale = Object.entries(D1_TABLES as Record<string, { columns: Record<string, ColumnClass> }>).flatMap(([table, { columns }]) =>
      Object.keys(columns).filter((column) => !schema.get(table)?.includes(column)).map((column) => `${table}.${column}`),
    );
    expect(stale).toEqual([]);
  });

  it("fails on a migration that adds a column or a table it does not classify", () => {
    const db = migrated();
    db.exec("ALTER TABLE receipts ADD COLUMN shopper_email TEXT; CREATE TABLE receipt_notes (receipt_id TEXT, note TEXT)");
    expect(unclassified(schemaOf(db))).toEqual(["receipt_notes", "receipts.shopper_email"]);
  });

  it("classifies every binding of both Workers' configs but the shards', whose tables it maps", () => {
    const bindings = new Set([...bindingsOf("wrangler.jsonc"), ...bindingsOf("src/notifier/wrangler.jsonc")].filter((name) => !name.startsWith("DB_")));
    expect([...bindings].filter((name) => !(name in BINDINGS)).sort()).toEqual([]);
    expect(Object.keys(BINDINGS).filter((name) => !bindings.has(name)).sort()).toEqual([]);
  });

  it("says for each personal place how the erasure reaches it, and every table whose rows it removes has a statement in the erasure", () => {
    const erased = new Set<string>(ERASURE_STEPS.map((step) => step.table));
    for (const [table, { columns }] of Object.entries(D1_TABLES as Record<string, { columns: Record<string, ColumnClass> }>)) {
      for (const [column, place] of Object.entries(columns)) {
        if (place === NOT_PERSONAL) continue;
        expect(place.holds.length, `${table}.${column}`).toBeGreaterThan(0);
        const said = place.reach.how === "never readable" ? place.reach.why : place.reach.when;
        expect(said.length, `${table}.${column}`).toBeGreaterThan(10);
        // A place the erasure changes in the shards' pages takes part through the erasure's list.
        if (place.reach.how !== "never readable" && table !== "erasure_requests") {
          expect(erased.has(table), `${table} has no erasure statements`).toBe(true);
        }
      }
    }
  });
});
