/**
 * The one shape of SQL in this service: a statement is its text with positional parameters
 * (`?1`, `?2`, ...) and the values that go in them, built by a named function of the storage
 * module that owns its table. A batch is a list of statements, possibly from several owners.
 *
 * Two ways to run one: a Worker (or Miniflare) binds the values ({@link bound}); an operator
 * script, whose `wrangler d1 execute` takes no bind parameters, inlines them as literals that no
 * value can escape ({@link inlined}). This file stays free of Workers types: the scripts run on
 * Node.
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

/**
 * The statement's text with each parameter replaced by its value as a literal, for
 * `wrangler d1 execute`: text as {@link sqlLiteral} writes it, numbers as numbers, null as NULL.
 *
 * @throws RangeError for a parameter without a number or without a value.
 * @example inlined(statement("SELECT ?1", "o'brien")) // "SELECT CAST(X'6f27627269656e' AS TEXT)"
 */
export function inlined({ sql, params }: Statement): string {
  return sql.replace(PARAMETER, (match, index: string | undefined) => {
    if (index === undefined) return match;
    const position = Number(index);
    if (index === "" || position < 1 || position > params.length) {
      throw new RangeError(`parameter ${match} has no value (${params.length} given)`);
    }
    return sqlLiteral(params[position - 1]!);
  });
}

/**
 * One value as an SQL literal. Text is written as the hex of its UTF-8 bytes, cast back to text:
 * the literal holds only hex digits between `X'` and `'`, so no value (quotes, `--`, `;`,
 * backslashes, `%`, `_`, any length) can end it early or reach the SQL around it, and a
 * comparison with it is exact, byte for byte. Bytes are the same literal, left a BLOB.
 *
 * @example sqlLiteral("o'brien") // "CAST(X'6f27627269656e' AS TEXT)"
 */
export function sqlLiteral(value: SqlValue): string {
  if (value === null) return "NULL";
  if (typeof value === "number") {
    if (!Number.isFinite(value)) throw new RangeError(`not a finite number: ${value}`);
    return String(value);
  }
  if (value instanceof Uint8Array) return `X'${hexOf(value)}'`;
  return `CAST(X'${hexOf(new TextEncoder().encode(value))}' AS TEXT)`;
}

function hexOf(bytes: Uint8Array): string {
  let hex = "";
  for (const byte of bytes) hex += byte.toString(16).padStart(2, "0");
  return hex;
}
