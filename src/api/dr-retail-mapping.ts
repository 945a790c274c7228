/**
 * A DR Retail receipt read as our receipt model (docs/api.md#dr-retail-mapping): what the app,
 * the feed and the archive see of it beside the original. Amounts in DR are decimal numbers of
 * the currency's major unit; ours are integers of its minor unit. Each amount is converted from
 * its own digits in the body's text, never through a float product, and one that has more
 * decimals than the currency's minor unit (or no exact integer of it within 2^53) is refused,
 * named by its JSON pointer. The model must then keep every rule of our own receipt model, as a
 * body of our shape must: what breaks one is refused, named by the DR field it came from.
 */
import type { DrRetailBody } from "../shared/dr-retail.ts";
import { plainMessage } from "../shared/issue-wording.ts";
import { receiptModel, type ReceiptModel } from "../shared/schemas.ts";
import { drBodyRefusal, formatFieldPath } from "./body.ts";

type Holder = Record<string, unknown> | unknown[];
type Item = DrRetailBody["items"][number];
type Line = ReceiptModel["line_items"][number];

/** The description of the line that carries a paid total's difference to the sum of the lines. */
export const UNITEMISED = "Difference to the paid total (not itemised by the till)";

/** The most lines our model holds (docs/api.md#add). */
const MAX_LINES = 500;

// ISO 4217 currencies whose minor unit is not the hundredth; every other code has two decimals.
const DECIMALS: Record<string, number> = {
  BIF: 0, CLP: 0, DJF: 0, GNF: 0, ISK: 0, JPY: 0, KMF: 0, KRW: 0, PYG: 0, RWF: 0, UGX: 0, UYI: 0, VND: 0, VUV: 0, XAF: 0, XOF: 0, XPF: 0,
  BHD: 3, IQD: 3, JOD: 3, KWD: 3, LYD: 3, OMR: 3, TND: 3,
  CLF: 4, UYW: 4,
};

/** How many decimals a currency's minor unit has: 2 unless ISO 4217 says otherwise. */
export function minorUnitDecimals(currency: string): number {
  return DECIMALS[currency.toUpperCase()] ?? 2;
}

/**
 * The exact number of minor units a JSON number's text stands for, or why there is none: more
 * decimals than `decimals`, or beyond ±(2^53 − 1).
 * @example minorUnitsOf("41.10", 2) // 4110n
 * @example minorUnitsOf("4.105", 2) // "has more than 2 decimals"
 */
export function minorUnitsOf(numberText: string, decimals: number): bigint | string {
  const match = /^(-?)(\d+)(?:\.(\d+))?(?:[eE]([+-]?\d+))?$/.exec(numberText);
  if (!match) return "is not a JSON number";
  const [, sign, whole, fraction = "", exponent = "0"] = match;
  // value = digits × 10^(shift − decimals); an exponent far out is refused before 10 ** it is made.
  const digits = BigInt(`${whole}${fraction}`);
  const shift = decimals - fraction.length + Number(exponent);
  const tooLarge = `is larger than ${MAX_MINOR} minor units`;
  let minor: bigint;
  if (digits === 0n) minor = 0n;
  else if (shift >= 0) {
    if (shift > 30) return tooLarge;
    minor = digits * 10n ** BigInt(shift);
  } else {
    const divisor = -shift > 400 ? undefined : 10n ** BigInt(-shift);
    if (divisor === undefined || digits % divisor !== 0n) return `has more than ${decimals} decimal${decimals === 1 ? "" : "s"}, the minor unit of its currency`;
    minor = digits / divisor;
  }
  if (minor > MAX_MINOR) return tooLarge;
  return sign === "-" ? -minor : minor;
}

const MAX_MINOR = BigInt(Number.MAX_SAFE_INTEGER);

// 16 digits in a row, or with one point among them: the shortest a number can be whose value a
// double may not hold. Such text may also be in a string (a card token, a GTIN-14 and a date are
// not), which only costs the slower exact parse.
const LONG_DIGITS = /(?:\d\.?){16}/;

/**
 * Parses a body that passed its version's rules, keeping the text of every number: the amounts
 * are read from their digits as sent. A JSON number of at most 15 significant digits is the
 * double JSON.parse makes of it, whose shortest text (String) has the same value; only a body
 * with a longer run of digits is parsed with JSON.parse's source text access, which costs a
 * reviver call per value.
 */
function parseKeepingNumbers(text: string): { body: DrRetailBody; numberText: (holder: Holder, key: string | number) => string } {
  if (!LONG_DIGITS.test(text)) {
    return { body: JSON.parse(text) as DrRetailBody, numberText: (holder, key) => String((holder as Record<string, number>)[key]) };
  }
  const sources = new WeakMap<object, Map<string, string>>();
  const body = JSON.parse(text, function (this: Holder, key: string, value: unknown, context?: { source?: string }) {
    if (typeof value === "number" && context?.source !== undefined) {
      let held = sources.get(this);
      if (!held) sources.set(this, (held = new Map()));
      held.set(key, context.source);
    }
    return value;
  }) as DrRetailBody;
  return {
    body,
    numberText: (holder, key) => {
      const source = sources.get(holder)?.get(String(key));
      // A runtime without source text access would make every amount go through a float.
      if (source === undefined) throw new Error("JSON.parse gave no source text for a number");
      return source;
    },
  };
}

/**
 * Our receipt model of a DR Retail body that passed its version's rules (docs/api.md#dr-retail-mapping).
 * Throws a 406 naming the JSON pointer of what cannot be mapped exactly, or of the DR field whose
 * mapping breaks a rule of our receipt model.
 */
export function mapDrRetail(text: string, versionLabel: string): ReceiptModel {
  const { body, numberText } = parseKeepingNumbers(text);
  const currency = body.currency.toUpperCase();
  const decimals = minorUnitDecimals(currency);
  const refuse = (pointer: string, reason: string): never => {
    throw drBodyRefusal(pointer, reason, versionLabel);
  };
  const minor = (holder: Holder, key: string | number, pointer: string, decimalsOf = decimals): number => {
    const result = minorUnitsOf(numberText(holder, key), decimalsOf);
    return typeof result === "string" ? refuse(`${pointer}/${key}`, result) : Number(result);
  };

  const lines: Line[] = [];
  const lineOrigins: Origin[] = [];
  const addLine = (line: Line, at: string, fields: OriginFields) => {
    lines.push(line);
    lineOrigins.push({ at, fields });
  };
  body.items.forEach((item, index) => {
    const line = itemLine(item, `/items/${index}`, minor, refuse);
    if (line) addLine(line, `/items/${index}`, item.type === "deposit" ? DEPOSIT_FIELDS : ARTICLE_FIELDS);
  });
  body.retail_price_modifiers?.forEach((modifier, index) => {
    const pointer = `/retail_price_modifiers/${index}`;
    const action = modifier.action ?? "subtract";
    if (action === "replace") refuse(`${pointer}/action`, "replace has no amount of its own to map: send the price after it on the items");
    const amount = minor(modifier as Holder, "amount", pointer) * (action === "subtract" ? -1 : 1);
    const description = joined(modifier.description?.collection) ?? (action === "subtract" ? "Discount" : "Surcharge");
    addLine({ description, quantity: 1, unit_price: amount, total: amount, ...vatRate(modifier.tax_percentage) }, pointer, MODIFIER_FIELDS);
  });
  body.totals.forEach((total, index) => {
    if (total.type !== "rounding" || total.amount === 0) return;
    const amount = minor(total as Holder, "amount", `/totals/${index}`) * (total.refund ? -1 : 1);
    addLine({ description: "Rounding", quantity: 1, unit_price: amount, total: amount }, `/totals/${index}`, AMOUNT_FIELDS);
  });
  if (lines.length === 0) refuse("/items", "holds no sale, return or deposit item: our model needs at least one line");

  // Our total is what the shopper paid, and equals the sum of the lines. Where the till's own
  // `paid` total differs from the sum of its lines (Kivra's published examples do), the model
  // shows the difference as a line of its own rather than refusing a receipt the format accepts
  // or hiding the gap in another line's amount.
  const sum = lines.reduce((sum, line) => sum + BigInt(line.total), 0n);
  const paid = body.totals.flatMap((total, index) => (total.type === "paid" ? [{ total, index }] : []));
  const totalAt = paid.length === 0 ? "/totals" : `/totals/${paid[0]!.index}/amount`;
  const receiptTotal =
    paid.length === 0 ? sum : paid.reduce((sum, { total, index }) => sum + BigInt(minor(total as Holder, "amount", `/totals/${index}`) * (total.refund ? -1 : 1)), 0n);
  if (receiptTotal > MAX_MINOR || receiptTotal < -MAX_MINOR) refuse("/totals", `add up to more than ${MAX_MINOR} minor units`);
  if (receiptTotal !== sum) {
    const difference = Number(receiptTotal - sum);
    addLine({ description: UNITEMISED, quantity: 1, unit_price: difference, total: difference }, totalAt, {});
  }
  if (lines.length > MAX_LINES) refuse("/items", `maps to ${lines.length} lines with the price modifiers, rounding and any difference to the paid total; our model holds at most ${MAX_LINES}`);

  const vatOrigins: Origin[] = [];
  const vat = body.totals.flatMap((total, index) =>
    total.type !== "vat"
      ? []
      : (total.sub_totals ?? []).map((sub, subIndex) => {
          const pointer = `/totals/${index}/sub_totals/${subIndex}`;
          const sign = sub.refund ?? total.refund ? -1 : 1;
          vatOrigins.push({ at: pointer, fields: VAT_FIELDS });
          return {
            rate: sub.tax_percentage,
            amount: sign * minor(sub as Holder, "amount", pointer),
            taxable_amount: sign * minor(sub as Holder, "taxable_amount", pointer),
            net_amount: sign * minor(sub as Holder, "net_amount", pointer),
          };
        }),
  );

  const payments = body.payments.map((payment, index) => {
    const pointer = `/payments/${index}`;
    const foreign = payment.foreign_currency_amount;
    return {
      method: payment.tender.type,
      amount: minor(payment as Holder, "amount", pointer) * (payment.refund ? -1 : 1),
      ...(foreign && {
        foreign_currency: {
          currency: foreign.currency.toUpperCase(),
          amount: minor(foreign as Holder, "original_face_amount", `${pointer}/foreign_currency_amount`, minorUnitDecimals(foreign.currency)) * (payment.refund ? -1 : 1),
        },
      }),
    };
  });

  const extended = body.receipt_identifier.extended_number?.value;
  const model: ReceiptModel = {
    purchased_at: body.time_of_purchase,
    currency,
    total: Number(receiptTotal),
    line_items: lines,
    store_id: body.business_unit.unit_id ?? body.business_unit.service_id,
    pos_receipt_number: extended ?? String(body.receipt_identifier.sequence_number),
    payments,
    ...(vat.length > 0 && { vat }),
  };
  // Every consumer reads the model as our own shape's receipt; it keeps the rules that one does.
  const checked = receiptModel.safeParse(model, { error: plainMessage });
  if (!checked.success) {
    const { path, message } = checked.error.issues[0]!;
    const origins = { line_items: lineOrigins, vat: vatOrigins, payments: payments.map((_, index) => ({ at: `/payments/${index}`, fields: PAYMENT_FIELDS })) };
    refuse(drPointerOf(path, origins, { ...TOP_LEVEL_ORIGINS, total: totalAt }), `maps to ${formatFieldPath(path)} of our receipt model, which ${message}`);
  }
  return model;
}

// The DR field each field of a part of the model is read from, relative to that part's pointer.
type OriginFields = Readonly<Record<string, string>>;

/** Where a line, VAT rate or payment of the model comes from in the DR body. */
interface Origin {
  at: string;
  fields: OriginFields;
}

const ARTICLE_FIELDS = { description: "description", quantity: "quantity/value", unit_price: "actual_sales_unit_price", total: "extended_amount", vat_rate: "tax_percentage" };
const DEPOSIT_FIELDS = { description: "description", quantity: "quantity", unit_price: "unit_amount", total: "amount", vat_rate: "tax_percentage" };
const MODIFIER_FIELDS = { description: "description", unit_price: "amount", total: "amount", vat_rate: "tax_percentage" };
const AMOUNT_FIELDS = { unit_price: "amount", total: "amount" };
const VAT_FIELDS = { rate: "tax_percentage", amount: "amount", taxable_amount: "taxable_amount", net_amount: "net_amount" };
const PAYMENT_FIELDS = { method: "tender/type", amount: "amount", foreign_currency: "foreign_currency_amount" };
const TOP_LEVEL_ORIGINS: OriginFields = {
  purchased_at: "/time_of_purchase",
  currency: "/currency",
  line_items: "/items",
  store_id: "/business_unit",
  pos_receipt_number: "/receipt_identifier",
  payments: "/payments",
  vat: "/totals",
};

// The JSON pointer into the DR body of the field a model's path was mapped from: the field itself
// where one field gives it (the line's own `tax_percentage`), else the part it belongs to.
function drPointerOf(path: readonly PropertyKey[], lists: Record<string, readonly Origin[]>, topLevel: OriginFields): string {
  const [field, index, member] = path;
  const origin = typeof field === "string" && typeof index === "number" ? lists[field]?.[index] : undefined;
  if (!origin) return topLevel[String(field)] ?? "";
  const inner = typeof member === "string" ? origin.fields[member] : undefined;
  return inner === undefined ? origin.at : `${origin.at}/${inner}`;
}

type Minor = (holder: Holder, key: string | number, pointer: string) => number;

// A sale, return or deposit is a line; a text item has no place in our model.
function itemLine(item: Item, pointer: string, minor: Minor, refuse: (pointer: string, reason: string) => never): Line | undefined {
  if (item.type === "text") return undefined;
  // A sale's or return's tax_percentage is checked with its prices (src/shared/dr-retail.ts).
  const vat = vatRate(item.tax_percentage as number | undefined);
  if (item.type === "deposit") {
    const sign = item.refund ? -1 : 1;
    if (item.quantity === 0) refuse(`${pointer}/quantity`, "must not be 0: a line of our model has a quantity");
    const description = lineText(item.description ?? joined(item.text?.collection), "Deposit");
    return { description, quantity: sign * item.quantity, unit_price: minor(item as Holder, "unit_amount", pointer), total: sign * minor(item as Holder, "amount", pointer), ...vat };
  }
  const sign = item.type === "return" ? -1 : 1;
  if (item.quantity.value === 0) refuse(`${pointer}/quantity/value`, "must not be 0: a line of our model has a quantity");
  const identifier = item.identifiers.find(({ identifier_type }) => identifier_type === "gtin") ?? item.identifiers[0];
  const priced = "extended_amount" in item;
  return {
    description: lineText(item.description, `Item ${item.sequence_number}`),
    quantity: sign * item.quantity.value,
    unit_price: priced ? minor(item as Holder, "actual_sales_unit_price", pointer) : 0,
    total: priced ? sign * minor(item as Holder, "extended_amount", pointer) : 0,
    ...(identifier && { sku: identifier.value }),
    ...vat,
    ...(item.type === "return" && item.receipt_reference && { receipt_reference: { value: item.receipt_reference.value, context: item.receipt_reference.context } }),
  };
}

function vatRate(rate: number | undefined): { vat_rate?: number } {
  return rate === undefined ? {} : { vat_rate: rate };
}

function joined(collection: readonly string[] | undefined): string | undefined {
  const text = collection?.join(" ").trim();
  return text === "" ? undefined : text;
}

// Our line's description holds 1–200 characters; the original keeps a longer one whole.
function lineText(text: string | undefined, fallback: string): string {
  const characters = [...(text?.trim() || fallback)];
  return characters.length <= 200 ? characters.join("") : `${characters.slice(0, 199).join("")}…`;
}
