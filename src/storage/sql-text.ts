/**
 * Text inlined into SQL for `wrangler d1 execute`, which takes no bind parameters. A value is
 * written as the hex of its UTF-8 bytes, cast back to text: the literal holds only hex digits
 * between `X'` and `'`, so no value (quotes, `--`, `;`, backslashes, `%`, `_`, any length) can
 * end it early or reach the SQL around it, and the comparison is exact, byte for byte.
 *
 * @example sqlText("o'brien") // "CAST(X'6f27627269656e' AS TEXT)"
 */
export function sqlText(value: string): string {
  let hex = "";
  for (const byte of new TextEncoder().encode(value)) hex += byte.toString(16).padStart(2, "0");
  return `CAST(X'${hex}' AS TEXT)`;
}
