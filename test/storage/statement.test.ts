/**
 * A statement bound in a Worker, and as D1's query API takes it (src/storage/statement.ts): text
 * bound as a parameter, anything else written as a literal. In that form every value must mean
 * exactly what it means bound, against the real local D1, whatever it holds. Every way a statement
 * runs passes test/support/statement-conformance.ts as well.
 */
import { describe, expect, it } from "vitest";
import { bound, sqlLiteral, statement, withTextParams, type SqlValue, type Statement } from "../../src/storage/statement.ts";
import { SHARDS } from "../support/shards.ts";

const db = SHARDS[0]!.db;

/** The statement run as D1's query API runs it: its parameters, all strings, bound as text. */
const viaApi = (query: Statement) => {
  const { sql, params } = withTextParams(query);
  expect(params.every((param) => typeof param === "string")).toBe(true);
  return db.prepare(sql).bind(...params).first();
};

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

describe("statements: values in D1 query API form read back exactly as bound ones", () => {
  it.each(HOSTILE.map((value) => [JSON.stringify(value), value]))("%s", async (_label, value) => {
    // D1 binds every JS number as REAL, an integer literal is INTEGER: SQLite compares them as equal.
    const query = statement(
      `SELECT ?1 AS value, CASE typeof(?1) WHEN 'integer' THEN 'number' WHEN 'real' THEN 'number' ELSE typeof(?1) END AS type,
        ?2 AS marker`,
      value,
      "'?2'",
    );
    const viaBind = await bound(db, query).first();
    expect(await viaApi(query)).toEqual(viaBind);
    expect(viaBind).toMatchObject({ value, marker: "'?2'" });
  });

  it("leaves question marks inside the SQL's own quoted strings alone", () => {
    expect(withTextParams(statement("SELECT '?1', ?1, 'it''s ?2'", "x"))).toEqual({ sql: "SELECT '?1', ?1, 'it''s ?2'", params: ["x"] });
  });

  it("keeps text as parameters, renumbered in order of first use, and writes the other values in the SQL", () => {
    const query = statement("SELECT ?3 AS c, ?1 AS a, ?2 AS b, ?3 = ?1 AS same, ?4 AS nothing", "a-1", 5, "c-3", null);
    expect(withTextParams(query)).toEqual({ sql: "SELECT ?1 AS c, ?2 AS a, 5 AS b, ?1 = ?2 AS same, NULL AS nothing", params: ["c-3", "a-1"] });
  });

  it("a negative number written in the SQL cannot start a comment after a minus", async () => {
    const query = statement("SELECT ?1-?2 AS difference", 5, -3);
    expect(withTextParams(query).sql).not.toContain("--");
    expect(await viaApi(query)).toEqual({ difference: 8 });
  });

  it("refuses a parameter without a number or without a value, and a number that is not finite", () => {
    expect(() => withTextParams(statement("SELECT ?", "x"))).toThrow(RangeError);
    expect(() => withTextParams(statement("SELECT ?1, ?2", "x"))).toThrow(RangeError);
    expect(() => withTextParams(statement("SELECT ?1", Number.NaN))).toThrow(RangeError);
  });

  it("bytes go in as a BLOB, bound or written as a literal, and read back as the same bytes", async () => {
    const bytes = new Uint8Array([0, 39, 0xff, 10, 92]);
    const query = statement("SELECT ?1 AS value, typeof(?1) AS type", bytes);
    expect(sqlLiteral(bytes)).toBe("X'0027ff0a5c'");
    const viaBind = await bound(db, query).first();
    expect(await viaApi(query)).toEqual(viaBind);
    expect(viaBind).toEqual({ value: [...bytes], type: "blob" });
  });

  it("writes text as a hex literal that holds nothing of the value's own characters", () => {
    expect(sqlLiteral("o'brien")).toBe("CAST(X'6f27627269656e' AS TEXT)");
    expect(sqlLiteral(null)).toBe("NULL");
    expect(sqlLiteral(7)).toBe("7");
    expect(sqlLiteral(-7)).toBe("(-7)");
  });
});
