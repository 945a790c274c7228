/**
 * Full card numbers (PANs), which the service must never store (PCI DSS; docs/api.md#card-numbers):
 * the rule for a field that holds a card number, and the narrower one for every other string of
 * a body. Both read the digits as a reader would, whatever their script: `４１１１`, `٤١١١` and
 * `4111` are the same four digits.
 */

/** What a refusal says of a field holding a full card number, never repeating it. */
export const FULL_CARD_NUMBER = "holds a full card number; send it masked, e.g. 527500******7651";

/**
 * Whether a card-number field (DR's `bank_identification_number`, a gift card's `card_number`)
 * holds a full card number: a run of 12–19 digits, leading zeros aside, that passes the Luhn
 * check (ISO/IEC 7812), or one that free text would mask ({@link holdsCardNumberInText}), so that
 * a card-number field is never stored masked by the service in place of refused. Any character
 * but a letter, a digit or a masking character (`*`, `#`, `•`, `●`) between two digits is a
 * separator and joins them, so a masked number (`527500******7651`) never passes while
 * `4111‐1111.1111 1111`, `４１１１１１１１１１１１１１１１`, `00004111111111111111` and
 * `4111111111111111A` do.
 * @example isFullCardNumber("4111.1111.1111.1111") // true
 */
export function isFullCardNumber(value: string): boolean {
  const joined = digitRuns(value, (character) => !MASK.test(character) && !LETTER.test(character)).some(({ digits }) => {
    const significant = digits.replace(/^0+/, "");
    return significant.length >= 12 && significant.length <= 19 && passesLuhn(significant);
  });
  return joined || holdsCardNumberInText(value);
}

/**
 * Whether free text (any other string of a body, or a member's name) holds a full card number
 * written as one: 13–19 digits standing alone (no letter, digit or `+` touching either end),
 * groups split by one space, dash or point at most, beginning as a card issuer's number does (3–6,
 * or 2221–2720), passing the Luhn check, and not a GTIN-13 or GTIN-14 with its check digit. The
 * narrower rule keeps a barcode, a phone number, a date-led receipt number or a hexadecimal token
 * from being taken for a card one time in ten (docs/api.md#card-numbers says why each).
 * @example holdsCardNumberInText("Paid with 4111 1111 1111 1111") // true
 * @example holdsCardNumberInText("EAN 4006381333931") // false
 */
export function holdsCardNumberInText(value: string): boolean {
  return CANDIDATE_IN_TEXT.test(value) && cardNumbersInText([...value]).length > 0;
}

// What every card number in free text holds, read in one pass of the regex engine: 13 digits,
// each after the last with at most one separator between. Most strings of a body have no such
// run, and reading them a character at a time cost an add of 40 KB about 4 ms of CPU.
const CANDIDATE_IN_TEXT = /\p{Nd}(?:[\p{Zs}\p{Pd}.]?\p{Nd}){12}/u;


/**
 * `value` with every card number {@link holdsCardNumberInText} finds in it masked: its first six
 * and last four digits kept as written, each digit between them `*`, its separators kept. The
 * result holds no card number by that rule (a mask ends a run), and is `value` itself where it
 * held none.
 * @example maskCardNumbersInText("Fakturanr: 2260 6633 2099 9960") // "Fakturanr: 2260 66** **** 9960"
 */
export function maskCardNumbersInText(value: string): string {
  if (!CANDIDATE_IN_TEXT.test(value)) return value;
  const characters = [...value];
  const found = cardNumbersInText(characters);
  if (found.length === 0) return value;
  for (const { positions } of found) {
    for (const at of positions.slice(SHOWN_DIGITS.first, -SHOWN_DIGITS.last)) characters[at] = "*";
  }
  return characters.join("");
}

// How many leading and trailing digits of a card number masking keeps: PCI DSS allows the first
// six and the last four.
const SHOWN_DIGITS = { first: 6, last: 4 } as const;

// The runs of `characters` that free text holds as card numbers (see holdsCardNumberInText).
function cardNumbersInText(characters: readonly string[]): DigitRun[] {
  return digitRuns(characters, (character) => TEXT_SEPARATOR.test(character), 1).filter(
    ({ digits, before, after }) =>
      !ATTACHED.test(before) &&
      !ATTACHED.test(after) &&
      before !== "+" &&
      digits.length >= 13 &&
      digits.length <= 19 &&
      hasIssuerPrefix(digits) &&
      passesLuhn(digits) &&
      !isGtin(digits),
  );
}

// A masked digit: PCI DSS shows at most the first 8 and last 4.
const MASK = /^[*#•●]$/u;
const LETTER = /^\p{L}$/u;
const DIGIT = /^\p{Nd}$/u;
const TEXT_SEPARATOR = /^[\p{Zs}\p{Pd}.]$/u;
// A run touching one of these is part of a longer word or number, not a card number of its own.
const ATTACHED = /^[\p{L}\p{Nd}]$/u;

/** A run of digits, as ASCII, with the characters just before and after it ("" at an end). */
interface DigitRun {
  digits: string;
  /** Where each digit stands among the characters (code points) of the value. */
  positions: number[];
  before: string;
  after: string;
}

/**
 * The runs of digits in `value`: digits joined by up to `maxSeparators` characters for which
 * `isSeparator` holds (any number when not given).
 */
function digitRuns(value: string | readonly string[], isSeparator: (character: string) => boolean, maxSeparators = Infinity): DigitRun[] {
  const characters = typeof value === "string" ? [...value] : value;
  const runs: DigitRun[] = [];
  const values = new Map<string, number>();
  let at = 0;
  while (at < characters.length) {
    if (!DIGIT.test(characters[at]!)) {
      at++;
      continue;
    }
    const start = at;
    let digits = "";
    const positions: number[] = [];
    let end = at;
    while (at < characters.length) {
      if (DIGIT.test(characters[at]!)) {
        const digit = characters[at]!;
        let known = values.get(digit);
        if (known === undefined) values.set(digit, (known = digitValue(digit)));
        digits += known;
        positions.push(at);
        end = ++at;
        continue;
      }
      let gap = 0;
      while (at < characters.length && gap < maxSeparators && !DIGIT.test(characters[at]!) && isSeparator(characters[at]!)) {
        at++;
        gap++;
      }
      if (gap === 0 || at >= characters.length || !DIGIT.test(characters[at]!)) break;
    }
    runs.push({ digits, positions, before: characters[start - 1] ?? "", after: characters[end] ?? "" });
    at = end;
  }
  return runs;
}

// Unicode assigns every decimal digit in a block of ten, from 0 to 9, and blocks of one script's
// styles lie side by side (the mathematical digits are five such blocks): a digit's value is its
// distance from the first digit before it with no other character between, modulo ten.
function digitValue(digit: string): number {
  let codePoint = digit.codePointAt(0)!;
  if (codePoint <= 0x39) return codePoint - 0x30;
  const own = codePoint;
  while (DIGIT.test(String.fromCodePoint(codePoint - 1))) codePoint--;
  return (own - codePoint) % 10;
}

function passesLuhn(digits: string): boolean {
  let sum = 0;
  for (let index = 0; index < digits.length; index++) {
    let digit = Number(digits[digits.length - 1 - index]);
    if (index % 2 === 1) digit = digit * 2 > 9 ? digit * 2 - 9 : digit * 2;
    sum += digit;
  }
  return sum % 10 === 0;
}

// The card schemes' ranges (ISO/IEC 7812 major industry identifiers 3–6, and Mastercard's 2-series
// 2221–2720); a number led by 0, 1, 7, 8, 9 or 20xx (a date) is no card of theirs.
function hasIssuerPrefix(digits: string): boolean {
  if ("3456".includes(digits[0]!)) return true;
  const four = Number(digits.slice(0, 4));
  return four >= 2221 && four <= 2720;
}

// A GS1 article number of 13 or 14 digits whose last digit checks the others (weights 3 and 1 from
// the right): what a barcode holds, and what the Luhn check passes one time in ten.
function isGtin(digits: string): boolean {
  if (digits.length !== 13 && digits.length !== 14) return false;
  let sum = 0;
  for (let index = 1; index < digits.length; index++) {
    sum += Number(digits[digits.length - 1 - index]) * (index % 2 === 1 ? 3 : 1);
  }
  return (10 - (sum % 10)) % 10 === Number(digits.at(-1));
}

/** Where a parsed body holds full card numbers in free text. */
export interface CardNumbersInBody {
  /** The path of the first object one of whose member names holds one: a name is refused, never masked. */
  inName?: PropertyKey[];
  /** The path of every string that holds one, in the order of the text: each is masked. */
  values: PropertyKey[][];
}

/**
 * The strings of a parsed body that hold a full card number by `holdsCardNumberInText`, in the
 * order of the text, unless a member name holds one first (then that alone). No recursion: the
 * body's nesting is bounded, but its breadth only by its size.
 */
export function findCardNumbersInText(body: unknown): CardNumbersInBody {
  const found: CardNumbersInBody = { values: [] };
  // Each value with the step that reached it; a path is spelled out only for what is found.
  const pending: { value: unknown; at: Step | null }[] = [{ value: body, at: null }];
  while (pending.length > 0) {
    const { value, at } = pending.pop()!;
    if (typeof value === "string") {
      if (holdsCardNumberInText(value)) found.values.push(pathOf(at));
      continue;
    }
    if (typeof value !== "object" || value === null) continue;
    const members: [PropertyKey, unknown][] = Array.isArray(value) ? value.map((item, index) => [index, item]) : Object.entries(value);
    if (!Array.isArray(value) && members.some(([name]) => holdsCardNumberInText(String(name)))) return { inName: pathOf(at), values: [] };
    // Last pushed, first read: reversed, they are read in the order of the text.
    for (const [key, member] of members.reverse()) pending.push({ value: member, at: { key, parent: at } });
  }
  return found;
}

/** A member or item's key, and the step that reached its container (null: the body itself). */
interface Step {
  key: PropertyKey;
  parent: Step | null;
}

function pathOf(step: Step | null): PropertyKey[] {
  const path: PropertyKey[] = [];
  for (let at = step; at !== null; at = at.parent) path.unshift(at.key);
  return path;
}

/**
 * A JSON text with the card numbers of its strings masked ({@link maskCardNumbersInText}), every
 * other byte as it was: only a string that held one is written again, as `JSON.stringify` writes
 * it, the same value but its masked digits. Its names are left alone: one that holds a card
 * number is refused before ({@link findCardNumbersInText}).
 */
export function maskCardNumbersInJson(json: string): string {
  return json.replace(JSON_STRING, (token) => {
    const value = JSON.parse(token) as string;
    const masked = maskCardNumbersInText(value);
    return masked === value ? token : JSON.stringify(masked);
  });
}

// A string token of a valid JSON text: no raw quote, backslash or control character inside but
// as an escape.
const JSON_STRING = /"(?:[^"\\]|\\.)*"/g;
