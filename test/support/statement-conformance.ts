/**
 * One suite of statements that every way a statement runs must pass with the same rows, so that a
 * statement cannot mean two things (src/storage/statement.ts): bound in a Worker
 * (test/storage/statement-conformance.test.ts), in-process on the local state
 * (test/scripts/statement-conformance-local.test.ts), and through D1's query API, text bound as
 * strings and the rest written as literals (test/scripts/statement-conformance-remote.test.ts).
 * It imports nothing of Workers or Node: the workers and node projects both run it.
 */
import { beforeAll, describe, expect, it } from "vitest";
import { statement, type Statement } from "../../src/storage/statement.ts";

/** Runs statements on one database as one batch and returns each statement's rows. */
export type RunStatements = (statements: readonly Statement[]) => Promise<unknown[][]>;

/** A batch, and the rows each of its statements returns. */
export interface ConformanceCase {
  name: string;
  statements: Statement[];
  rows: Record<string, unknown>[][];
}

const TABLE = "statement_conformance";

/** The scratch table the cases write, made empty before them. */
export const CONFORMANCE_SETUP: Statement[] = [
  statement(`DROP TABLE IF EXISTS ${TABLE}`),
  statement(`CREATE TABLE ${TABLE} (id TEXT PRIMARY KEY, n INTEGER, note TEXT)`),
];

// Text that SQL, a shell or a JSON body could take for something else.
const TEXTS = [
  "o'brien",
  "'); DROP TABLE receipts; --",
  "a;b;c",
  "?1 ?2 ? ?? ''",
  "100% _under_ back\\slash",
  "ünïcödé ✓ 🧾 中文",
  "line\u2028separator\u2029paragraph\nnewline\ttab",
  "",
  "42",
  "NULL",
];

// Numbers D1 binds as numbers; a string in their place compares, sorts and adds as text.
const NUMBERS = [0, -1, 42, 3.25, Number.MAX_SAFE_INTEGER, Number.MIN_SAFE_INTEGER];

/** The cases, each with the rows every way must return. */
export const CONFORMANCE_CASES: ConformanceCase[] = [
  ...TEXTS.map((text) => ({
    name: `text ${JSON.stringify(text)} stays that text`,
    statements: [statement("SELECT ?1 AS value, typeof(?1) AS type, length(?1) AS length, ?1 = ?2 AS same", text, text)],
    rows: [[{ value: text, type: "text", length: [...text].length, same: 1 }]],
  })),
  ...NUMBERS.map((number) => ({
    name: `number ${number} stays a number`,
    // D1 binds a JS number as REAL and a literal integer is INTEGER: both are numbers, equal in SQL.
    statements: [statement("SELECT ?1 AS value, typeof(?1) IN ('integer', 'real') AS numeric, ?2 - ?1 AS distance", number, 1)],
    rows: [[{ value: number, numeric: 1, distance: 1 - number }]],
  })),
  {
    name: "a minus before a negative number is a subtraction, not a comment",
    statements: [statement("SELECT ?1-?2 AS difference", 5, -3)],
    rows: [[{ difference: 8 }]],
  },
  {
    name: "NULL is NULL",
    statements: [statement("SELECT ?1 IS NULL AS missing, typeof(?1) AS type, coalesce(?1, ?2) AS fallback", null, "none")],
    rows: [[{ missing: 1, type: "null", fallback: "none" }]],
  },
  {
    name: "numbers compare as numbers and text as text",
    statements: [statement("SELECT ?1 < ?2 AS numbers, ?3 < ?4 AS texts, ?1 = ?3 AS number_is_text", 9, 10, "9", "10")],
    rows: [[{ numbers: 1, texts: 0, number_is_text: 0 }]],
  },
  {
    name: "the same parameter twice, and parameters out of order",
    statements: [statement("SELECT ?3 AS c, ?1 AS a, ?2 AS b, ?3 = ?1 AS same, ?2 * 2 AS twice", "t'1", 5, "t'1")],
    rows: [[{ c: "t'1", a: "t'1", b: 5, same: 1, twice: 10 }]],
  },
  {
    name: "question marks in the SQL's own strings are no parameters",
    statements: [statement("SELECT '?1' AS literal, ?1 AS value, 'it''s ?2' AS other", "x?")],
    rows: [[{ literal: "?1", value: "x?", other: "it's ?2" }]],
  },
  {
    name: "bytes stay bytes",
    statements: [statement("SELECT hex(?1) AS hex, typeof(?1) AS type, length(?1) AS length", new Uint8Array([0, 39, 0xff, 10]))],
    rows: [[{ hex: "0027FF0A", type: "blob", length: 4 }]],
  },
  {
    name: "LIMIT takes a bound number, LIKE a bound pattern",
    statements: [
      statement(`INSERT INTO ${TABLE} (id, n) VALUES (?1, 1), (?2, 2), (?3, 3), (?4, 4)`, "limit-a", "limit-b", "limit-c", "limit_d"),
      statement(`SELECT id FROM ${TABLE} WHERE id LIKE ?1 ORDER BY id LIMIT ?2`, "limit-%", 2),
    ],
    rows: [[], [{ id: "limit-a" }, { id: "limit-b" }]],
  },
  {
    name: "json_each reads a JSON text parameter",
    statements: [
      statement(
        "SELECT value, type FROM json_each(?1) WHERE json_array_length(?1) = ?2 ORDER BY key",
        JSON.stringify(["o'brien", "a;--b", "ü\u2028", 7]),
        4,
      ),
    ],
    rows: [[{ value: "o'brien", type: "text" }, { value: "a;--b", type: "text" }, { value: "ü\u2028", type: "text" }, { value: 7, type: "integer" }]],
  },
  {
    name: "RETURNING rows come back, the column's affinity applied",
    statements: [
      statement(`INSERT INTO ${TABLE} (id, n, note) VALUES (?1, ?2, ?3) RETURNING id, n, typeof(n) AS n_type, note`, "ret'1 --;", 42, null),
    ],
    rows: [[{ id: "ret'1 --;", n: 42, n_type: "integer", note: null }]],
  },
  {
    name: "a later statement of a batch reads what an earlier one wrote",
    statements: [
      statement(`INSERT INTO ${TABLE} (id, n, note) VALUES (?1, ?2, ?3)`, "batch-1", 1, "first"),
      statement(`UPDATE ${TABLE} SET n = n + ?2, note = note || ?3 WHERE id = ?1`, "batch-1", 41, "; then 'second'"),
      statement(`SELECT id, n, note FROM ${TABLE} WHERE id = ?1 AND n > ?2`, "batch-1", 9),
    ],
    rows: [[], [], [{ id: "batch-1", n: 42, note: "first; then 'second'" }]],
  },
];

/** Defines the suite for one way of running statements: every case returns its rows. */
export function describeStatementConformance(way: string, run: RunStatements): void {
  describe(`statements mean the same ${way}`, () => {
    beforeAll(async () => {
      await run(CONFORMANCE_SETUP);
    });
    it.each(CONFORMANCE_CASES.map((each) => [each.name, each] as const))("%s", async (_name, each) => {
      expect(await run(each.statements)).toEqual(each.rows);
    });
  });
}
