/**
 * The two ways a statement runs (src/storage/statement.ts): bound in a Worker, and inlined for
 * `wrangler d1 execute`. Inlined, every value must mean exactly what it means bound, against the
 * real local D1, whatever it holds.
 */
import { describe, expect, it } from "vitest";
import { bound, inlined, sqlLiteral, statement, type SqlValue } from "../../src/storage/statement.ts";
import { SHARDS } from "../support/shards.ts";

const db = SHARDS[0]!.db;

const HOSTILE: SqlValue[] = [
  "o'brien",
  "'); DROP TABLE receipts; --",
  "?1 ?2 ''",
  "back\\slash %_ \u0000 nul",
  "ünïcödé ✓ 🧾",
  "",
  0,
  -42,
  3.25,
  null,
];

describe("statements: inlined values read back exactly as bound ones", () => {
  it.each(HOSTILE.map((value) => [JSON.stringify(value), value]))("%s", async (_label, value) => {
    // D1 binds every JS number as REAL, an inlined integer is INTEGER: SQLite compares them as equal.
    const query = statement(
      `SELECT ?1 AS value, CASE typeof(?1) WHEN 'integer' THEN 'number' WHEN 'real' THEN 'number' ELSE typeof(?1) END AS type,
        ?2 AS marker`,
      value,
      "'?2'",
    );
    const viaBind = await bound(db, query).first();
    const viaText = await db.prepare(inlined(query)).first();
    expect(viaText).toEqual(viaBind);
    expect(viaBind).toMatchObject({ value, marker: "'?2'" });
  });

  it("leaves question marks inside the SQL's own quoted strings alone", () => {
    expect(inlined(statement("SELECT '?1', ?1, 'it''s ?2'", "x"))).toBe(`SELECT '?1', ${sqlLiteral("x")}, 'it''s ?2'`);
  });

  it("refuses a parameter without a number or without a value, and a number that is not finite", () => {
    expect(() => inlined(statement("SELECT ?", "x"))).toThrow(RangeError);
    expect(() => inlined(statement("SELECT ?1, ?2", "x"))).toThrow(RangeError);
    expect(() => inlined(statement("SELECT ?1", Number.NaN))).toThrow(RangeError);
  });

  it("bytes go in as a BLOB, bound or inlined, and read back as the same bytes", async () => {
    const bytes = new Uint8Array([0, 39, 0xff, 10, 92]);
    const query = statement("SELECT ?1 AS value, typeof(?1) AS type", bytes);
    expect(sqlLiteral(bytes)).toBe("X'0027ff0a5c'");
    const viaBind = await bound(db, query).first();
    expect(await db.prepare(inlined(query)).first()).toEqual(viaBind);
    expect(viaBind).toEqual({ value: [...bytes], type: "blob" });
  });

  it("writes text as a hex literal that holds nothing of the value's own characters", () => {
    expect(sqlLiteral("o'brien")).toBe("CAST(X'6f27627269656e' AS TEXT)");
    expect(sqlLiteral(null)).toBe("NULL");
    expect(sqlLiteral(7)).toBe("7");
  });
});
