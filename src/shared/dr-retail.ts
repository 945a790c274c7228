/**
 * The rules of Kivra's digital receipt, DR Retail v1.0 and v1.1 (docs/api.md#dr-retail), written
 * from the published schemas and their field reference as zod checks: add reads a body of either
 * version by its Content-Type profile. The two versions differ only in the card tender (v1.1 adds
 * three ISO 8583 fields and anchors its patterns). A JSON Schema validator library would cost the
 * Worker's cold start more than these few hundred lines, and zod/mini is here already.
 *
 * Where the schema allows members it does not name (an object without `additionalProperties:
 * false`) the check does too, and those members stay in the stored original. Amounts are checked
 * as the schema types them (JSON numbers); whether they fit the currency's minor unit is the
 * mapping's question (src/api/dr-retail-mapping.ts).
 */
import * as z from "zod/mini";
import { FULL_CARD_NUMBER, isFullCardNumber } from "./card-numbers.ts";
import { isRfc3339DateTime } from "./date-time.ts";
import type { DrRetailVersion } from "./dr-retail-profiles.ts";
import { plainMessage } from "./issue-wording.ts";

const BARCODE_TYPES = ["Interleaved2Of5", "EAN13", "EAN8", "Codabar", "Code39", "Code93", "Code128", "AztecCode", "Datamatrix", "PDF417", "QRCode"] as const;
const CONTEXTS = ["store", "chain", "global"] as const;
const UNITS = ["ea", "6 pack", "12 pack", "24 pack", "kg", "grm", "km", "m", "cm", "mm", "annual", "days", "hours", "seconds", "l", "gallon"] as const;
const ENTRY_METHODS = ["smartcard", "micr", "msr", "keyed", "scanned", "weighed", "measured", "rfid", "automatic", "integrated_chip_card", "tapped", "waved"] as const;

function oneOf<const T extends readonly [string, ...string[]]>(values: T) {
  return z.enum(values, { error: `must be one of: ${values.join(", ")}` });
}

const text = z.string();
const number = z.number();
const atLeastZero = z.number().check(z.gte(0, "must be 0 or more"));
const integer = z.int({ error: "must be an integer" });
const flag = z.boolean();
const currencyCode = z.string().check(z.regex(/^[a-zA-Z]{3}$/, "must be an ISO 4217 code of 3 letters"));

// JSON Schema `format`: date-time is RFC 3339 (with an offset), date its full-date. Each check
// names its format to the OpenAPI document (z.meta), which a refine cannot state: one definition
// validates and documents (docs/api.md#dr-retail).
const dateTime = z.string().check(
  z.refine(isRfc3339DateTime, "must be an RFC 3339 date-time with an offset, e.g. 2026-11-22T14:03:00+01:00"),
  z.meta({ format: "date-time" }),
);
const date = z.string().check(
  z.refine((value) => isRfc3339DateTime(`${value}T00:00:00Z`) && /^\d{4}-\d{2}-\d{2}$/.test(value), "must be an RFC 3339 date, e.g. 2026-12-31"),
  z.meta({ format: "date" }),
);
// The format's own grammar (RFC 5321) is stricter than this check, so an address the document
// calls valid always passes it.
const email = z.string().check(z.regex(/^[^\s@]+@[^\s@]+$/, "must be an e-mail address"), z.meta({ format: "email" }));
const uri = z.string().check(
  z.refine((value) => /^[A-Za-z][A-Za-z0-9+.-]*:/.test(value) && URL.canParse(value), "must be an absolute URI"),
  z.meta({ format: "uri" }),
);
const contactPhone = z.string().check(z.regex(/^(\(?((\+|(00))[0-9]{1,3})\)?)?( ?-?\(?[0-9]+\)?)+$/, "must be a phone number"));
const IDENTIFYING_PHONE = /^\+(?:[0-9]\x20?){6,14}[0-9]$/;
const identifyingPhone = z.string().check(z.regex(IDENTIFYING_PHONE, "must be an international phone number, e.g. +46 75 777 7777"));

const textArray = z.looseObject({ type: oneOf(["array"]), collection: z.array(text) });

const barcode = z.strictObject({ value: text, type: oneOf(BARCODE_TYPES) });

const reference = z.looseObject({ value: text, type: z.optional(oneOf(BARCODE_TYPES)), context: oneOf(CONTEXTS) });

const address = z
  .looseObject({
    street_address: z.optional(text),
    extended_address: z.optional(text),
    post_box: z.optional(text),
    locality: text,
    postal_code: text,
    region: z.optional(text),
    country_name: z.optional(text),
    type: z.optional(z.looseObject({ type: z.optional(oneOf(["home", "business"])) })),
  })
  .check(...requireOneOf(["street_address", "post_box"]));

const geoLocation = z.looseObject({ latitude: number, longitude: number });

const loyaltyMembership = z.looseObject({
  program: text,
  level: z.optional(text),
  customer_number: text,
  incremental_count: z.optional(integer),
  current_count: z.optional(integer),
  target_count: z.optional(integer),
  effective_date: z.optional(date),
  expiration_date: z.optional(date),
});

const quantity = z.looseObject({ value: number, unit: oneOf(UNITS), entry_method: z.optional(oneOf(ENTRY_METHODS)) });

const priceModifier = {
  action: z.optional(oneOf(["add", "subtract", "replace"])),
  unit_amount: z.optional(number),
  amount: atLeastZero,
  percent: z.optional(atLeastZero),
  quantity: z.optional(integer.check(z.gte(1, "must be 1 or more"))),
  description: z.optional(textArray),
  tax_percentage: z.optional(number),
};

// A sub-total of any kind but vat's and paid's: the schema's specific kinds (loyalty discount,
// points-earning gross) add nothing its generic kind does not already allow.
const subTotal = z.looseObject({ amount: atLeastZero, refund: z.optional(flag), text: z.optional(textArray), type: z.optional(text) });

const totalBase = { amount: atLeastZero, refund: z.optional(flag) };

const total = z.discriminatedUnion("type", [
  z.looseObject({ ...totalBase, type: z.literal("discount"), sub_totals: z.optional(z.array(subTotal)) }),
  z.looseObject({
    ...totalBase,
    type: z.literal("paid"),
    sub_totals: z.optional(z.array(z.strictObject({ type: oneOf(["received", "returned"]), amount: atLeastZero, text: z.optional(textArray) }))),
  }),
  z.looseObject({ ...totalBase, type: z.literal("gross"), sub_totals: z.optional(z.array(subTotal)) }),
  z.strictObject({
    ...totalBase,
    type: z.literal("vat"),
    sub_totals: z.optional(
      z.array(
        z.looseObject({
          amount: atLeastZero,
          refund: z.optional(flag),
          taxable_amount: atLeastZero,
          net_amount: atLeastZero,
          tax_percentage: atLeastZero,
        }),
      ),
    ),
  }),
  z.strictObject({ ...totalBase, type: z.literal("loyalty") }),
  z.looseObject({ ...totalBase, type: z.literal("net"), sub_totals: z.optional(z.array(subTotal)) }),
  z.looseObject({ ...totalBase, type: z.literal("rounding"), sub_totals: z.optional(z.array(subTotal)) }),
]);

const itemPosition = {
  sequence_number: integer,
  item_link: z.optional(integer),
  text: z.optional(textArray),
};

const article = {
  ...itemPosition,
  identifiers: z.array(z.looseObject({ identifier_type: oneOf(["pos", "gtin", "srs"]), value: text })),
  serial_number: z.optional(text),
  lot_number: z.optional(text),
  description: text,
  quantity,
  entry_method: z.optional(oneOf(ENTRY_METHODS)),
  eligible_for_frequent_shopper_points: z.optional(flag),
};

// A sale or return line is priced (the three amounts) or paid in loyalty points, never both.
const priced = z.looseObject({
  unit_cost_price: z.optional(number),
  regular_sales_unit_price: z.optional(number),
  extended_gross_amount: number,
  actual_sales_unit_price: number,
  extended_amount: number,
  retail_price_modifiers: z.optional(z.array(z.looseObject(priceModifier))),
  extended_discount_amount: z.optional(number),
  tax_percentage: z.optional(number),
  tax_amount: z.optional(number),
  foreign_currency: z.optional(z.looseObject({ currency: currencyCode, original_face_amount: atLeastZero, exchange_rate: z.optional(atLeastZero) })),
});
const PRICES = ["actual_sales_unit_price", "extended_amount", "extended_gross_amount"] as const;

const pricedOrPoints = z.superRefine((item: Record<string, unknown>, context) => {
  const hasPoints = typeof item["points"] === "number";
  // A parse of its own, which the body's error map does not reach: it gets the same wording.
  const prices = priced.safeParse(item, { error: plainMessage });
  if (prices.success && hasPoints) {
    context.issues.push({ code: "custom", message: "must not be given beside prices: a line is priced or paid in points", path: ["points"], input: item["points"] });
  } else if (!prices.success && !hasPoints) {
    const pricedAtAll = PRICES.some((name) => name in item);
    if (pricedAtAll || !("points" in item)) for (const issue of prices.error.issues) context.issues.push({ ...issue, input: undefined });
    else context.issues.push({ code: "custom", message: "must be a number", path: ["points"], input: item["points"] });
  }
});

// The same rule to the document: exactly one of "priced" (the component of `priced`) and "paid in
// points" holds, as the check reads them.
const PRICED_OR_POINTS = z.meta({ oneOf: [{ $ref: "#/components/schemas/DrRetailPricedLine" }, { required: ["points"], properties: { points: { type: "number" } } }] });

const item = z.discriminatedUnion("type", [
  z.looseObject({ ...article, type: z.literal("sale") }).check(pricedOrPoints, PRICED_OR_POINTS),
  z.looseObject({ ...article, type: z.literal("return"), receipt_reference: z.optional(reference) }).check(pricedOrPoints, PRICED_OR_POINTS),
  z.looseObject({ ...itemPosition, type: z.literal("text"), text: textArray }),
  z.looseObject({
    ...itemPosition,
    type: z.literal("deposit"),
    description: z.optional(text),
    unit_amount: number,
    amount: number,
    quantity: integer,
    refund: flag,
    tax_percentage: z.optional(number),
    sub_deposits: z.optional(z.array(z.looseObject({ amount: atLeastZero, refund: z.optional(flag), tax_percentage: atLeastZero }))),
  }),
]);

// A card number the service must never hold (docs/api.md#card-numbers): the message says so
// without echoing it. The full number's rule comes first, so that `4111‐1111‐1111‐1111` is named
// for what it is rather than for the pattern its hyphens break.
function cardNumber(pattern?: RegExp) {
  return z.string().check(
    z.refine((value) => !isFullCardNumber(value), FULL_CARD_NUMBER),
    ...(pattern ? [z.regex(pattern, "must be a masked card number, e.g. 527500******7651")] : []),
  );
}

const tenderDetails = z.discriminatedUnion("type", [
  z.looseObject({ type: z.literal("array"), collection: z.array(text), barcode: z.optional(barcode) }),
  z.strictObject({ type: z.literal("map"), collection: z.unknown() }),
]);

const otherTenderDetails = z.looseObject({ type: oneOf(["array"]), collection: z.array(text), barcode: z.optional(barcode) });

function cardTender(version: DrRetailVersion) {
  const v11 = version === "1.1";
  const matching = (pattern: RegExp, message: string) => z.optional(z.string().check(z.regex(pattern, message)));
  return z.strictObject({
    type: z.literal("creditdebit"),
    bank_identification_number: z.optional(cardNumber(/^[A-Za-z0-9*]{0,99}$/)),
    ...(v11
      ? {
          acquiring_institution_id_code: matching(/^[0-9]{0,11}$/, "must be at most 11 digits"),
          card_acceptor_id: matching(/^[a-zA-Z0-9-]{0,15}$/, "must be at most 15 letters, digits or hyphens"),
          card_acceptor_name: matching(/^[a-zA-Z0-9 .,\-/]{0,40}$/, "must be at most 40 letters, digits, spaces or . , - /"),
        }
      : {}),
    // v1.0's patterns are unanchored: `\w{0,12}` holds for any string, `\w{8}` for one with 8
    // word characters in a row somewhere. v1.1 anchors them.
    retrieval_reference_number: v11 ? matching(/^[a-zA-Z0-9]{0,12}$/, "must be at most 12 letters or digits") : z.optional(text),
    card_acceptor_terminal_id: v11
      ? matching(/^[a-zA-Z0-9-]{8}$/, "must be 8 letters, digits or hyphens")
      : matching(/\w{8}/, "must hold 8 letters, digits or underscores in a row"),
    merchant_identifier: v11 ? matching(/^[a-zA-Z0-9-]{0,15}$/, "must be at most 15 letters, digits or hyphens") : z.optional(text),
    approval_code: v11
      ? matching(/^[a-zA-Z0-9]{6,}$/, "must be 6 or more letters or digits")
      : matching(/\w{6}/, "must hold 6 letters, digits or underscores in a row"),
    card_token: z.optional(z.looseObject({ value: text, scheme: text })),
    payment_slip: z.optional(textArray),
  });
}

function tender(version: DrRetailVersion) {
  return z.discriminatedUnion("type", [
    z.strictObject({ type: z.literal("cash") }),
    cardTender(version),
    z.strictObject({
      type: z.literal("giftcard"),
      card_number: cardNumber(),
      date_sold: z.optional(date),
      date_activated: z.optional(date),
      expiration_date: z.optional(date),
      initial_balance: z.optional(number),
      current_balance: number,
      barcode: z.optional(barcode),
    }),
    z.strictObject({
      type: z.literal("mobile"),
      provider: z.optional(oneOf(["swish:pay"])),
      phone: z.optional(identifyingPhone),
      tender_details: z.optional(tenderDetails),
    }),
    z
      .strictObject({
        type: z.literal("loyalty"),
        points_redeemed: z.optional(number),
        amount_redeemed: z.optional(number),
        loyalty_program: z.optional(text),
      })
      .check(...requireOneOf(["points_redeemed", "amount_redeemed"])),
    z.strictObject({
      type: z.literal("coupon"),
      name: z.optional(text),
      description: z.optional(text),
      coupon_code: text,
      manufacture_id: z.optional(text),
      family_code: z.optional(text),
      promotion_code: z.optional(text),
      coupon_value: number,
      quantity: z.optional(quantity),
      expiration_date: z.optional(date),
      item_links: z.optional(z.array(integer)),
      barcode: z.optional(barcode),
    }),
    z.strictObject({ type: oneOf(["purchase_order", "accounts_receivable", "house_account", "voucher"]), tender_details: z.optional(otherTenderDetails) }),
    z.strictObject({ type: z.literal("other"), type_name: text, tender_details: z.optional(otherTenderDetails) }),
  ]);
}

function payment(version: DrRetailVersion) {
  return z.strictObject({
    amount: number,
    amount_applied_to_bill: z.optional(number),
    foreign_currency_amount: z.optional(z.looseObject({ currency: currencyCode, original_face_amount: atLeastZero, exchange_rate: z.optional(atLeastZero) })),
    rounding: z.optional(number),
    refund: z.optional(flag),
    tender: tender(version),
  });
}

// customer.id names the shopper one way: exactly one of the four, or a loyalty membership.
const CIVIC_REGISTRATION_NUMBER = /^[12]{1}[90]{1}[0-9]{6}-?[0-9]{4}$/;
const CUSTOMER_IDS = { service_id: text, email, phone: identifyingPhone, civic_registration_number: z.string().check(z.regex(CIVIC_REGISTRATION_NUMBER, "must be a Swedish personnummer of 12 digits")) };
// The same rule to the document: a loyalty membership, or exactly one member, one of the four.
const ONE_CUSTOMER_ID = z.meta({
  anyOf: [
    { required: ["loyalty"] },
    ...Object.entries({
      service_id: { type: "string" },
      email: { type: "string", format: "email" },
      phone: { type: "string", pattern: IDENTIFYING_PHONE.source },
      civic_registration_number: { type: "string", pattern: CIVIC_REGISTRATION_NUMBER.source },
    }).map(([name, schema]) => ({ required: [name], maxProperties: 1, properties: { [name]: schema } })),
  ],
});
const customerId = z.looseObject({ loyalty: z.optional(loyaltyMembership) }).check(
  ONE_CUSTOMER_ID,
  z.superRefine((id: Record<string, unknown>, context) => {
    if ("loyalty" in id) return;
    const names = Object.keys(id);
    const name = names[0] as keyof typeof CUSTOMER_IDS | undefined;
    if (names.length !== 1 || !name || !(name in CUSTOMER_IDS)) {
      context.issues.push({ code: "custom", message: `must hold exactly one of: ${[...Object.keys(CUSTOMER_IDS), "loyalty"].join(", ")}`, path: [], input: id });
      return;
    }
    const result = CUSTOMER_IDS[name].safeParse(id[name], { error: plainMessage });
    if (!result.success) context.issues.push({ code: "custom", message: result.error.issues[0]!.message, path: [name], input: undefined });
  }),
);

const contact = z.looseObject({ address: z.optional(address), email: z.optional(email), phone: z.optional(contactPhone), website: z.optional(uri) });

const orderCustomer = z.strictObject({
  name: z.optional(text),
  contact: z.optional(z.strictObject({ address: z.optional(address), email: z.optional(email), phone: z.optional(contactPhone) })),
  geo_location: z.optional(geoLocation),
  loyalty: z.optional(loyaltyMembership),
});

/** The schema's any-of of required members: at least one of `names`, stated to the document as `anyOf`. */
function requireOneOf(names: readonly string[]) {
  return [
    z.superRefine((value: Record<string, unknown>, context) => {
      if (names.some((name) => value[name] !== undefined)) return;
      context.issues.push({ code: "custom", message: "is missing", path: [names[0]!], input: undefined });
    }),
    // Each branch names the member it requires among its own properties (any value: the object's
    // own schema types it), as Redocly asks of a `required`.
    z.meta({ anyOf: names.map((name) => ({ required: [name], properties: { [name]: {} } })) }),
  ] as const;
}

/** The body of add in DR Retail of `version`: the published schema's rules. */
export function drRetailBody(version: DrRetailVersion) {
  return z.strictObject({
    copy: z.optional(flag),
    business_unit: z.looseObject({
      name: text,
      service_id: z.string().check(z.regex(/^[0-9]{10}[0-9a-fA-F]{32}$/, "must be 10 digits and 32 hexadecimal digits, 42 characters")),
      unit_id: z.optional(text),
      organization_number: text,
      contact,
      geo_location: z.optional(geoLocation),
    }),
    cashier: z.optional(z.strictObject({ id: z.optional(text), name: z.optional(text) })),
    sales_recording_system: z
      .strictObject({ id: z.optional(text), name: z.optional(text), serial_number: z.optional(text) })
      .check(...requireOneOf(["id", "name"])),
    receipt_identifier: z.strictObject({ sequence_number: integer, extended_number: z.optional(reference) }),
    time_of_purchase: dateTime,
    currency: currencyCode,
    totals: z.array(total),
    header_text: z.optional(textArray),
    footer_text: z.optional(textArray),
    items: z.array(item),
    retail_price_modifiers: z.optional(z.array(z.looseObject({ ...priceModifier, item_links: z.optional(z.array(integer)) }))),
    payments: z.array(payment(version)),
    // The schema's anyOf makes every member but a given `id` free: its first branch names only `id`.
    customer: z.optional(z.looseObject({ id: z.optional(customerId) })),
    customer_order: z.optional(
      z
        .strictObject({ order_number: z.optional(text), order_reference: z.optional(text), customer: z.optional(orderCustomer) })
        .check(
          z.superRefine((order, context) => {
            if ((order.order_number === undefined) !== (order.order_reference === undefined)) return;
            context.issues.push({ code: "custom", message: "must hold exactly one of: order_number, order_reference", path: [], input: order });
          }),
          z.meta({ oneOf: [{ required: ["order_number"] }, { required: ["order_reference"] }] }),
        ),
    ),
    control_unit: z.optional(z.looseObject({ id: text, code: z.optional(text) })),
  });
}

/** The schemas of both versions, made once per isolate. */
export const DR_RETAIL_BODIES: Record<DrRetailVersion, ReturnType<typeof drRetailBody>> = {
  "1.0": drRetailBody("1.0"),
  "1.1": drRetailBody("1.1"),
};

/** A DR Retail body as a till writes it, for the types of the POS client and examples. */
export type DrRetailInput = z.input<ReturnType<typeof drRetailBody>>;

/** A DR Retail body that passed its version's rules. */
export type DrRetailBody = z.infer<ReturnType<typeof drRetailBody>>;

/**
 * The parts both versions share, by the name the OpenAPI document gives each: there each is one
 * component that both versions' bodies refer to, so the document holds it once.
 */
export const DR_RETAIL_PARTS: Record<string, z.ZodMiniType> = {
  DrRetailItem: item,
  DrRetailPricedLine: priced,
  DrRetailTotal: total,
  DrRetailText: textArray,
  DrRetailAddress: address,
  DrRetailContact: contact,
  DrRetailQuantity: quantity,
  DrRetailBarcode: barcode,
  DrRetailReference: reference,
  DrRetailLoyaltyMembership: loyaltyMembership,
  DrRetailCustomerId: customerId,
  DrRetailOrderCustomer: orderCustomer,
  DrRetailTenderDetails: tenderDetails,
  DrRetailOtherTenderDetails: otherTenderDetails,
};
