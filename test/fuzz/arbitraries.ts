/**
 * Generators of what a hostile or broken HTTP client can send: header sets and values, and
 * request bodies. Only what can reach the Worker is generated: the runtime refuses NUL, CR and LF
 * in a header value before any Worker runs, and strips white space around a value (docs/api.md
 * "Limits and hardening"); a real client's non-ASCII bytes arrive as the UTF-8 string they spell,
 * which is also what the runtime makes of a JavaScript string here.
 */
import fc from "fast-check";
import { validReceiptBody } from "../support/api.ts";

const SQL = ["' OR '1'='1", "'; DROP TABLE receipts; --", "1 UNION SELECT secret_hash FROM clients", "%", "_%", "\\", "`", "?1"];
const JSON_META = ['"', "'", '{"a":1}', "}]", "[", "\\u0000", "null", '","client_id":"x', "\\"];

const printable = fc.integer({ min: 0x20, max: 0x7e }).map((code) => String.fromCharCode(code));
const controlByte = fc
  .constantFrom(...Array.from({ length: 32 }, (_, code) => code).filter((code) => ![0, 10, 13].includes(code)), 0x7f)
  .map((code) => String.fromCharCode(code));

/**
 * A header value: mostly one of `valid` (list one several times to favour it), else a lookalike of one, or empty, huge, random
 * printable, with control bytes, SQL or JSON metacharacters, or (rarely: the runtime prints a
 * warning for each) Unicode.
 */
export function headerValue(valid: string[]): fc.Arbitrary<string> {
  const one = fc.constantFrom(...valid);
  return fc.oneof(
    { weight: 1000, arbitrary: one },
    { weight: 20, arbitrary: fc.tuple(one, fc.constantFrom("upper", "lower", "suffix", "prefix", "inner")).map(([value, how]) => lookalike(value, how)) },
    { weight: 10, arbitrary: fc.constantFrom("", " ", "\t", " \t ") },
    { weight: 10, arbitrary: fc.tuple(fc.integer({ min: 250, max: 262 }), printable).map(([length, char]) => char.repeat(length)) },
    { weight: 10, arbitrary: fc.integer({ min: 1_000, max: 20_000 }).map((length) => "h".repeat(length)) },
    { weight: 20, arbitrary: fc.string({ unit: printable, maxLength: 40 }) },
    { weight: 10, arbitrary: fc.tuple(one, controlByte, fc.nat()).map(([value, char, at]) => insert(value, char, at)) },
    { weight: 20, arbitrary: fc.tuple(one, fc.constantFrom(...SQL, ...JSON_META), fc.nat()).map(([value, meta, at]) => insert(value, meta, at)) },
    { weight: 10, arbitrary: fc.constantFrom(...SQL, ...JSON_META) },
    { weight: 1, arbitrary: fc.string({ unit: "grapheme", minLength: 1, maxLength: 8 }) },
  );
}

/** `value` listed `count` times, to favour it among the valid values of `headerValue`. */
export function times(value: string, count: number): string[] {
  return Array<string>(count).fill(value);
}

function lookalike(value: string, how: string): string {
  if (how === "upper") return value.toUpperCase();
  if (how === "lower") return value.toLowerCase();
  if (how === "suffix") return `${value}x`;
  if (how === "prefix") return `x${value}`;
  return value.replace(/-/, " ");
}

function insert(value: string, text: string, at: number): string {
  const index = at % (value.length + 1);
  return value.slice(0, index) + text + value.slice(index);
}

/**
 * A header set: each of `fields` present (under its name in any case) or left out, plus a few
 * other headers, sometimes one of the same name in another case, which HTTP joins with ", ".
 */
export function headerSet(fields: Record<string, fc.Arbitrary<string>>): fc.Arbitrary<Record<string, string>> {
  const entries = Object.entries(fields).map(([name, value]) =>
    fc.option(fc.tuple(fc.constantFrom(name, name.toUpperCase(), name.toLowerCase()), value), { nil: undefined, freq: 25 }),
  );
  const otherName = fc.oneof(
    fc.stringMatching(/^x-[a-z0-9-]{1,20}$/),
    fc.constantFrom(...Object.keys(fields).map((name) => name.replace(/^./, (first) => first.toUpperCase())), "cf-ray", "Accept", "Cookie"),
  );
  const others = fc.array(fc.tuple(otherName, headerValue(["1", "8f1c2a3b4d5e6f70-FRA", "text/html"])), { maxLength: 3 });
  return fc.tuple(fc.tuple(...entries), others).map(([chosen, extra]) => {
    const headers: Record<string, string> = {};
    for (const entry of [...chosen, ...extra]) if (entry) headers[entry[0]] = entry[1];
    return headers;
  });
}

/** A receipt body that keeps every rule of docs/api.md#add, with amounts of its own. */
export const validReceipt: fc.Arbitrary<Record<string, unknown>> = fc
  .record({
    purchased_at: fc.constantFrom("2026-11-22T14:03:00+01:00", "2026-11-22t13:03:00z", "2016-12-31T23:59:60Z", "2026-02-28T00:00:00.5-05:30"),
    currency: fc.constantFrom("EUR", "USD", "SEK", "XTS"),
    line_items: fc.array(
      fc.record(
        {
          description: fc.string({ unit: "grapheme", minLength: 1, maxLength: 40 }),
          quantity: fc.oneof(fc.integer({ min: 1, max: 9 }), fc.integer({ min: -3, max: -1 }), fc.constant(0.735)),
          unit_price: fc.integer({ min: -100_000, max: 100_000 }),
          total: fc.integer({ min: -100_000, max: 1_000_000 }),
          sku: fc.string({ maxLength: 13 }),
          vat_rate: fc.constantFrom(0, 7, 19, 100),
        },
        { requiredKeys: ["description", "quantity", "unit_price", "total"] },
      ),
      { minLength: 1, maxLength: 6 },
    ),
    metadata: fc.dictionary(fc.string({ maxLength: 10 }), fc.string({ maxLength: 20 }), { maxKeys: 3 }),
  })
  .map((receipt) => ({ ...receipt, total: receipt.line_items.reduce((sum, item) => sum + item.total, 0) }));

const WRONG_VALUES = [null, true, "x", "", 1.5, -0, [], {}, 2 ** 53, -(2 ** 53), 1e308, "2026-11-22", "eur", "\u0000"];

/** A valid receipt broken in one place: a field gone, of the wrong type, out of range, or extra. */
const brokenReceipt = fc
  .tuple(validReceipt, fc.nat(), fc.constantFrom(...WRONG_VALUES), fc.constantFrom("drop", "replace", "extra", "item", "items501", "meta21"))
  .map(([receipt, at, wrong, how]) => {
    const body: Record<string, any> = structuredClone(receipt);
    const keys = Object.keys(body);
    const key = keys[at % keys.length]!;
    if (how === "drop") delete body[key];
    if (how === "replace") body[key] = wrong;
    if (how === "extra") body[`x_${key}`] = wrong;
    if (how === "item") {
      const item = body.line_items[at % body.line_items.length];
      item[Object.keys(item)[at % Object.keys(item).length]!] = wrong;
    }
    if (how === "items501") body.line_items = Array.from({ length: 501 }, () => ({ description: "x", quantity: 1, unit_price: 1, total: 1 }));
    if (how === "meta21") body.metadata = Object.fromEntries(Array.from({ length: 21 }, (_, i) => [`k${i}`, "v"]));
    return body;
  });

const encoder = new TextEncoder();

/** Raw body texts and bytes that JSON.stringify would never make. */
const rawBody: fc.Arbitrary<string | Uint8Array> = fc.oneof(
  fc.integer({ min: 1, max: 33_000 }).map((depth) => "[".repeat(depth) + "]".repeat(depth)),
  fc.integer({ min: 1, max: 11_000 }).map((depth) => '{"a":'.repeat(depth) + "1" + "}".repeat(depth)),
  fc.integer({ min: 1, max: 13_000 }).map((count) => `{"line_items":[${Array(count).fill("1").join(",")}]}`),
  fc.constantFrom("9007199254740993", "1e400", "-1e400", "-0", "1.0", "123456789012345678901234567890").map((number) =>
    JSON.stringify(validReceiptBody()).replace('"total":248', `"total":${number}`),
  ),
  fc.constantFrom('"currency":"usd",', '"currency":"EUR",', '"total":1,', '"line_items":[],', '"__proto__":{"x":1},').map((first) =>
    `{${first}${JSON.stringify(validReceiptBody()).slice(1)}`,
  ),
  fc.tuple(fc.constantFrom([0xff], [0xfe, 0xff], [0xc0, 0xaf], [0xed, 0xa0, 0x80], [0xf4, 0x90, 0x80, 0x80], [0x80]), fc.nat()).map(([bad, at]) => {
    const bytes = encoder.encode(JSON.stringify(validReceiptBody()));
    const index = at % bytes.length;
    return new Uint8Array([...bytes.slice(0, index), ...bad, ...bytes.slice(index)]);
  }),
  fc.constant(`\ufeff${JSON.stringify(validReceiptBody())}`),
  fc.constant(JSON.stringify(validReceiptBody()).replace('"Rye bread"', '"\\ud800 bread"')),
  fc.constantFrom("", " ", "\n", "null", "[]", "{}", "{", "}", '"receipt"', "0"),
  fc.json({ maxDepth: 4 }),
  fc.uint8Array({ maxLength: 300 }),
  fc.integer({ min: 65_000, max: 70_000 }).map((size) => JSON.stringify(validReceiptBody()).padEnd(size, " ")),
);

/** An add body: valid (so that adds succeed), broken in one rule, or raw text and bytes. */
export const receiptBody: fc.Arbitrary<string | Uint8Array> = fc.oneof(
  { weight: 6, arbitrary: validReceipt.map((receipt) => JSON.stringify(receipt)) },
  { weight: 3, arbitrary: brokenReceipt.map((receipt) => JSON.stringify(receipt)) },
  { weight: 3, arbitrary: rawBody },
);

/** A body for routes that read none: whatever a client might attach anyway. */
export const strayBody: fc.Arbitrary<string | Uint8Array | undefined> = fc.option(rawBody, { nil: undefined, freq: 2 });

// Headers the runtime keeps in a slot of its own, where an empty value counts as none.
const SLOTTED = ["authorization", "content-type"];

/**
 * The value of a header as the Worker reads it: white space trimmed and repeats joined with ", ",
 * except that an empty Authorization or Content-Type line is no line
 * (docs/api.md#what-never-reaches-the-worker): the runtime joins a line onto an empty slot by
 * replacing it, so `"", "Bearer t"` arrives as `Bearer t`, `"Bearer t", ""` as `Bearer t, `
 * (no token), and `"", ""` as nothing.
 */
export function asReceived(headers: Record<string, string>, name: string): string | null {
  if (!SLOTTED.includes(name.toLowerCase())) return new Headers(headers).get(name);
  let value: string | null = null;
  for (const [sentName, sent] of Object.entries(headers)) {
    if (sentName.toLowerCase() !== name.toLowerCase()) continue;
    const line = new Headers({ [sentName]: sent }).get(sentName)!;
    value = value ? `${value}, ${line}` : line;
  }
  return value === "" ? null : value;
}

/**
 * docs/api.md#common-rules: the headers that name who or what a request is about; a comma in one
 * (a header sent twice arrives joined with ", ") is refused with 406.
 */
export const IDENTIFYING_HEADERS: readonly string[] = ["client_id", "chain_id", "app_user_id", "receipt_id", "Idempotency-Key"];

/** Whether header `name` as received is usable: {@link usable}, and no comma in an identifying header. */
export function usableHeader(name: string, value: string | null, maxLength = 256): value is string {
  return usable(value, maxLength) && !(IDENTIFYING_HEADERS.includes(name) && value.includes(","));
}

/** docs/api.md#common-rules: a value a route can use as a string (`Authorization` has no length limit). */
export function usable(value: string | null, maxLength = 256): value is string {
  return value !== null && /^[\x20-\x7e]*$/.test(value) && value.trim() !== "" && value.length <= maxLength;
}
