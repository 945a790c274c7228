/**
 * The one shape of SQL in this service: a statement is its text with positional parameters
 * (`?1`, `?2`, ...) and the values that go in them, built by a named function of the storage
 * module that owns its table. A batch is a list of statements, possibly from several owners.
 *
 * Three ways to run one, which must all mean the same (test/support/statement-conformance.ts): a
 * Worker binds the values ({@link bound}); an operator script binds them too, in-process on the
 * local state through Miniflare, or on the deployment through D1's query API, which binds text
 * alone ({@link withTextParams}). No value goes into a command line. This file stays free of
 * Workers types: the scripts run on Node.
 */

/** A value a statement's parameter takes: a Uint8Array goes in as a BLOB. */
export type SqlValue = string | number | Uint8Array | null;

/** SQL text with positional parameters, and the values of `?1`, `?2`, ... in that order. */
export interface Statement {
  sql: string;
  params: readonly SqlValue[];
}

/**
 * A statement of `sql` with `params` as `?1`, `?2`, ....
 *
 * @example statement("DELETE FROM receipts WHERE receipt_id = ?1", receiptId)
 */
export function statement(sql: string, ...params: SqlValue[]): Statement {
  return { sql, params };
}

/**
 * A statement that holds `inner` (a query with its own parameters, such as the receipts an
 * erasure's page selects) inside SQL of another owner: `build` gets inner's text and the
 * placeholders of `values`, numbered after inner's parameters.
 *
 * @example enclose(receipts, (ids, limit) => `DELETE ... WHERE receipt_id IN (${ids}) LIMIT ${limit}`, 500)
 */
export function enclose(
  inner: Statement,
  build: (innerSql: string, ...placeholders: string[]) => string,
  ...values: SqlValue[]
): Statement {
  const placeholders = values.map((_, index) => `?${inner.params.length + index + 1}`);
  return statement(build(inner.sql, ...placeholders), ...inner.params, ...values);
}

/** Whatever prepares SQL and binds values: a Worker's D1Database, or Miniflare's from Node. */
export interface Preparer<Prepared> {
  prepare(sql: string): { bind(...values: unknown[]): Prepared };
}

/**
 * The statement prepared on `db` with its values bound: the way a Worker runs one.
 *
 * @example await db.batch(statements.map((s) => bound(db, s)))
 */
export function bound<Prepared>(db: Preparer<Prepared>, { sql, params }: Statement): Prepared {
  return db.prepare(sql).bind(...params);
}

/** Whatever also runs a list of prepared statements as one batch (one transaction). */
export interface BatchRunner<Prepared, Result> extends Preparer<Prepared> {
  batch(statements: Prepared[]): Promise<Result[]>;
}

/** Runs the statements on `db` as one batch, their values bound; returns each one's result. */
export function runBatch<Prepared, Result>(db: BatchRunner<Prepared, Result>, statements: readonly Statement[]): Promise<Result[]> {
  return db.batch(statements.map((each) => bound(db, each)));
}

// A quoted SQL string (skipped: its text is not a parameter) or a positional parameter.
const PARAMETER = /'(?:[^']|'')*'|\?(\d*)/g;

/** A statement as D1's query API takes it: SQL text and the text values of its `?1`, `?2`, .... */
export interface TextStatement {
  sql: string;
  params: string[];
}

/**
 * The statement as D1's query API (`POST .../d1/database/{id}/query`) takes it, whose parameters
 * are strings and are bound as text: each text value stays a parameter, renumbered in order of
 * first use, so that no ID or other text reaches the SQL; a number, NULL or bytes, which a string
 * would change the meaning of (`?1 < ?2`, `LIMIT ?2`, `typeof(?1)`), goes in as its literal
 * ({@link sqlLiteral}), and none of them is personal.
 *
 * @throws RangeError for a parameter without a number or without a value.
 * @example withTextParams(statement("SELECT * FROM t WHERE id = ?2 LIMIT ?1", 10, "o'brien"))
 * // { sql: "SELECT * FROM t WHERE id = ?1 LIMIT 10", params: ["o'brien"] }
 */
export function withTextParams({ sql, params }: Statement): TextStatement {
  const texts: string[] = [];
  const renumbered = new Map<number, string>();
  const text = sql.replace(PARAMETER, (match, index: string | undefined) => {
    if (index === undefined) return match;
    const position = Number(index);
    if (index === "" || position < 1 || position > params.length) {
      throw new RangeError(`parameter ${match} has no value (${params.length} given)`);
    }
    const value = params[position - 1]!;
    if (typeof value !== "string") return sqlLiteral(value);
    let placeholder = renumbered.get(position);
    if (placeholder === undefined) {
      texts.push(value);
      placeholder = `?${texts.length}`;
      renumbered.set(position, placeholder);
    }
    return placeholder;
  });
  return { sql: text, params: texts };
}

/**
 * One value as an SQL literal, for the values D1's query API cannot bind faithfully and for SQL a
 * test writes. Text is written as the hex of its UTF-8 bytes, cast back to text:
 * the literal holds only hex digits between `X'` and `'`, so no value (quotes, `--`, `;`,
 * backslashes, `%`, `_`, any length) can end it early or reach the SQL around it, and a
 * comparison with it is exact, byte for byte. Bytes are the same literal, left a BLOB.
 *
 * @throws RangeError for a number that is not finite.
 * @example sqlLiteral("o'brien") // "CAST(X'6f27627269656e' AS TEXT)"
 */
export function sqlLiteral(value: SqlValue): string {
  if (value === null) return "NULL";
  if (typeof value === "number") {
    if (!Number.isFinite(value)) throw new RangeError(`not a finite number: ${value}`);
    // In parentheses, a negative number cannot make `--` with a minus before it (`?1-?2`).
    return value < 0 ? `(${value})` : String(value);
  }
  if (value instanceof Uint8Array) return `X'${hexOf(value)}'`;
  return `CAST(X'${hexOf(new TextEncoder().encode(value))}' AS TEXT)`;
}

function hexOf(bytes: Uint8Array): string {
  let hex = "";
  for (const byte of bytes) hex += byte.toString(16).padStart(2, "0");
  return hex;
}
