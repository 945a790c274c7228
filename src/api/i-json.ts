/**
 * Finds where a JSON text is not I-JSON (RFC 7493): a member name repeated within one object, a
 * lone surrogate, a Unicode noncharacter, or a NUL. JSON.parse accepts all four, yet parsers
 * disagree on them (first or last of two names wins, a surrogate becomes U+FFFD or an error, a C
 * reader ends a string at NUL), and add stores the text as sent for whoever reads it next.
 *
 * The same pass bounds the nesting (docs/api.md "Limits and hardening"): every reader after it
 * that walks the body by recursion (JSON.parse with a reviver, zod, JSON.stringify, the app's own
 * parser) then meets at most MAX_NESTING levels.
 */

/**
 * How deep arrays and objects may nest, the body's own object being the first level. A receipt
 * of either shape needs 7 at most (a DR tender's details); 64 leaves a till's own fields room.
 */
export const MAX_NESTING = 64;

/** A place where a JSON text is not I-JSON. */
export interface IJsonFault {
  /** The member or element at fault, from the top: `["line_items", 0, "sku"]`. */
  path: PropertyKey[];
  /** Which rule it breaks; `nesting` is an array or object opened past MAX_NESTING levels. */
  rule: "duplicate name" | "lone surrogate" | "noncharacter" | "NUL" | "nesting";
  /** Whether the member's name breaks it, rather than its value. */
  inName: boolean;
}

/**
 * Returns the first fault in `text`, which JSON.parse has accepted, or `undefined` for I-JSON.
 * One pass over the text, no recursion: the nesting is kept on an explicit stack, so 64 KiB of
 * brackets cannot exhaust the call stack, and the scan stops at the first level past MAX_NESTING.
 */
export function findIJsonFault(text: string): IJsonFault | undefined {
  const open: Container[] = [];
  let nextIsName = false;
  for (let at = 0; at < text.length; at++) {
    switch (text.charCodeAt(at)) {
      case OPEN_BRACE:
        if (open.length === MAX_NESTING) return { path: pathOf(open), rule: "nesting", inName: false };
        open.push({ names: new Set(), key: "" });
        nextIsName = true;
        break;
      case OPEN_BRACKET:
        if (open.length === MAX_NESTING) return { path: pathOf(open), rule: "nesting", inName: false };
        open.push({ names: undefined, key: 0 });
        break;
      case CLOSE_BRACE:
      case CLOSE_BRACKET:
        open.pop();
        nextIsName = false;
        break;
      case COMMA: {
        const container = open.at(-1)!;
        if (container.names) nextIsName = true;
        else container.key = (container.key as number) + 1;
        break;
      }
      case QUOTE: {
        const string = readString(text, at);
        if (nextIsName) {
          nextIsName = false;
          const container = open.at(-1)!;
          // A name with an escape may equal one without: `"\u0074otal"` is `total`.
          const name = string.escaped ? (JSON.parse(text.slice(at, string.end + 1)) as string) : text.slice(at + 1, string.end);
          container.key = name;
          if (string.rule) return { path: pathOf(open), rule: string.rule, inName: true };
          if (container.names!.has(name)) return { path: pathOf(open), rule: "duplicate name", inName: true };
          container.names!.add(name);
        } else if (string.rule) {
          return { path: pathOf(open), rule: string.rule, inName: false };
        }
        at = string.end;
        break;
      }
    }
  }
  return undefined;
}

// An object or array still open: the names it has so far, and the member or element being read.
interface Container {
  names: Set<string> | undefined;
  key: string | number;
}

const OPEN_BRACE = 0x7b;
const CLOSE_BRACE = 0x7d;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACKET = 0x5d;
const COMMA = 0x2c;
const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const LETTER_U = 0x75;

// The path of the value being read; an object's key is its last name read so far.
function pathOf(open: readonly Container[]): PropertyKey[] {
  return open.map((container) => container.key);
}

type Rule = Exclude<IJsonFault["rule"], "duplicate name" | "nesting">;

/**
 * Reads the string whose opening quote is at `start` to its closing quote, code unit by code
 * unit, escaped or raw alike: where it ends, whether it holds an escape, the first rule it breaks.
 */
function readString(text: string, start: number): { end: number; escaped: boolean; rule: Rule | undefined } {
  let escaped = false;
  let rule: Rule | undefined;
  let high = -1; // a high surrogate waiting for its low half
  for (let at = start + 1; ; at++) {
    if (high < 0) {
      PLAIN_RUN.lastIndex = at;
      PLAIN_RUN.test(text);
      at = PLAIN_RUN.lastIndex;
    }
    let unit = text.charCodeAt(at);
    if (unit === QUOTE) return { end: at, escaped, rule: rule ?? (high >= 0 ? "lone surrogate" : undefined) };
    if (unit === BACKSLASH) {
      escaped = true;
      at += 1;
      // The letter of \" \\ \/ \b \f \n \r \t stands in for its character: no rule concerns either.
      unit = text.charCodeAt(at);
      if (unit === LETTER_U) {
        unit = Number.parseInt(text.slice(at + 1, at + 5), 16);
        at += 4;
      }
    }
    rule ??= high >= 0 ? afterHighSurrogate(high, unit) : ruleOf(unit);
    high = high < 0 && isHighSurrogate(unit) ? unit : -1;
  }
}

// Code units that no rule concerns, that end nothing and escape nothing: most of a string, passed
// over in one step of the regex engine rather than a unit at a time (a 40 KB add's scan took 1 ms).
const PLAIN_RUN = /[^"\\\u0000\ud800-\udfff\ufdd0-\ufdef\ufffe\uffff]*/y;

function afterHighSurrogate(high: number, unit: number): Rule | undefined {
  if (unit < 0xdc00 || unit > 0xdfff) return "lone surrogate";
  const codePoint = 0x10000 + ((high - 0xd800) << 10) + (unit - 0xdc00);
  // U+nFFFE and U+nFFFF of every plane are noncharacters.
  return (codePoint & 0xfffe) === 0xfffe ? "noncharacter" : undefined;
}

// The rule a code unit breaks on its own (a high surrogate waits for the next).
function ruleOf(unit: number): Rule | undefined {
  if (unit === 0) return "NUL";
  if (unit >= 0xdc00 && unit <= 0xdfff) return "lone surrogate";
  if ((unit >= 0xfdd0 && unit <= 0xfdef) || unit >= 0xfffe) return "noncharacter";
  return undefined;
}

function isHighSurrogate(unit: number): boolean {
  return unit >= 0xd800 && unit <= 0xdbff;
}
