/**
 * add in DR Retail (docs/api.md#dr-retail): both versions by their Content-Type
 * profile, stored as sent with their format, mapped into our model with totals equal, and each
 * class of broken rule refused with its JSON pointer.
 */
import { describe, expect, it } from "vitest";
import { DR_RETAIL_EXAMPLE, DR_RETAIL_EXAMPLE_MAPPED } from "../../../src/api/openapi/documented-operations.ts";
import { UNITEMISED } from "../../../src/api/dr-retail-mapping.ts";
import { receiptModel } from "../../../src/shared/schemas.ts";
import { expectRefused, loggedRequests, newCaller, postAdd, rowCounts, uniqueId, validReceiptBody } from "../../support/api.ts";
import { drRetailContentType } from "../../../src/shared/dr-retail-profiles.ts";
import { drTestReceipts, type DrTestReceipt } from "../../support/dr-retail.ts";
import { waitForPushes } from "../../support/notices.ts";
import { storedReceipt } from "../../support/shards.ts";

const RECEIPTS = drTestReceipts();
const byName = (start: string): DrTestReceipt => RECEIPTS.find(({ name }) => name.startsWith(start))!;

async function addDr(receipt: Pick<DrTestReceipt, "version" | "body">, text = JSON.stringify(receipt.body)) {
  const { headers } = await newCaller();
  const answer = await postAdd({ ...headers, "Content-Type": drRetailContentType(receipt.version) }, text);
  return { answer, headers, text };
}

async function mappedOf(receipt: DrTestReceipt): Promise<Record<string, any>> {
  const { answer } = await addDr(receipt);
  expect(answer.status).toBe(200);
  return JSON.parse((await storedReceipt(answer.body.data.receipt_id))!.mapped as string);
}

describe("docs/api.md#dr-retail add in DR Retail: accepted, stored as sent, mapped with totals equal", () => {
  it.each(RECEIPTS.map((receipt) => [receipt.name, receipt] as const))("%s", async (_name, receipt) => {
    const text = JSON.stringify(receipt.body, null, 2);
    const { answer, headers } = await addDr(receipt, text);
    expect(answer.status).toBe(200);
    const row = (await storedReceipt(answer.body.data.receipt_id))!;
    expect(row).toMatchObject({ body: text, format: `dr-retail/v${receipt.version}`, app_user_id: headers.app_user_id });
    const mapped = JSON.parse(row.mapped as string);
    expect(receiptModel.safeParse(mapped).error).toBeUndefined();
    expect(mapped.total).toBe(receipt.mappedTotal);
    expect(mapped.line_items.reduce((sum: number, line: { total: number }) => sum + line.total, 0)).toBe(receipt.mappedTotal);
    expect(mapped.purchased_at).toBe(receipt.body.time_of_purchase);
    expect(mapped.currency).toBe(receipt.body.currency);
    expect(mapped.pos_receipt_number).toBe(receipt.body.receipt_identifier.extended_number.value);
    expect(mapped.store_id).toBe("store-0042");
    expect(mapped.payments.map(({ method }: { method: string }) => method)).toEqual(receipt.body.payments.map(({ tender }: any) => tender.type));
  });

  it("maps VAT per rate in minor units, and each line's rate", async () => {
    const mapped = await mappedOf(byName("VAT at 25, 12 and 6"));
    expect(mapped.vat).toEqual([
      { rate: 12, amount: 1176, taxable_amount: 10980, net_amount: 9804 },
      { rate: 25, amount: 1780, taxable_amount: 8900, net_amount: 7120 },
      { rate: 6, amount: 198, taxable_amount: 3500, net_amount: 3302 },
    ]);
    expect(mapped.line_items).toEqual([
      { description: "Bryggkaffe 500 g", quantity: 2, unit_price: 5490, total: 10980, sku: "7310000000001", vat_rate: 12 },
      { description: "Batterier AA 4-pack", quantity: 1, unit_price: 8900, total: 8900, sku: "7310000000002", vat_rate: 25 },
      { description: "Dagens Nyheter", quantity: 1, unit_price: 3500, total: 3500, sku: "7310000000003", vat_rate: 6 },
    ]);
  });

  it("maps a return as a negative line carrying its reference to the original receipt", async () => {
    const mapped = await mappedOf(byName("return"));
    expect(mapped.line_items).toEqual([
      {
        description: "Kingston USB-minne 8 GB",
        quantity: -1,
        unit_price: 10000,
        total: -10000,
        sku: "7310000000001",
        vat_rate: 25,
        receipt_reference: { value: "0042-3-000117", context: "store" },
      },
    ]);
    expect(mapped.payments).toEqual([{ method: "cash", amount: -10000 }]);
    expect(mapped.vat).toEqual([{ rate: 25, amount: -2000, taxable_amount: -10000, net_amount: -8000 }]);
  });

  it("maps rounding to a line of its own, and change given back to a negative payment", async () => {
    const mapped = await mappedOf(byName("cash, rounded"));
    expect(mapped.line_items.at(-1)).toEqual({ description: "Rounding", quantity: 1, unit_price: 20, total: 20 });
    expect(mapped.payments).toEqual([
      { method: "cash", amount: 10000 },
      { method: "cash", amount: -4400 },
    ]);
  });

  it("maps a receipt-level discount to a negative line, and a points-only line to 0", async () => {
    const mapped = await mappedOf(byName("loyalty member"));
    expect(mapped.line_items).toEqual([
      { description: "Västerbottensost", quantity: 0.532, unit_price: 12900, total: 6863, sku: "7310000000001", vat_rate: 12 },
      { description: "Apelsiner", quantity: 1.2, unit_price: 2495, total: 2994, sku: "7310000000002", vat_rate: 12 },
      { description: "Bonuspoäng kampanj", quantity: 1, unit_price: 0, total: 0, sku: "BONUS" },
      { description: "Medlemsrabatt", quantity: 1, unit_price: -1000, total: -1000, vat_rate: 12 },
    ]);
  });

  it("maps a foreign-currency payment in that currency's own minor units", async () => {
    const mapped = await mappedOf(byName("foreign currency"));
    expect(mapped.payments).toEqual([{ method: "cash", amount: 11900, foreign_currency: { currency: "EUR", amount: 1050 } }]);
  });

  it("maps a deposit to a line, and a currency without decimals to whole units", async () => {
    expect((await mappedOf(byName("Swish"))).line_items[1]).toEqual({ description: "Pant", quantity: 6, unit_price: 100, total: 600, vat_rate: 12 });
    expect((await mappedOf(byName("yen"))).line_items[0]).toMatchObject({ unit_price: 1280, total: 1280 });
  });

  it("reads the profile quoted, and a lower-case currency as its code", async () => {
    const receipt = byName("foreign currency");
    const { headers } = await newCaller();
    const quoted = 'application/json; charset=utf-8; profile="https://se.receipts.kivra.com/schemas/json/retail/v1.1"';
    const answer = await postAdd({ ...headers, "Content-Type": quoted }, { ...receipt.body, currency: "sek" });
    expect(answer.status).toBe(200);
    expect(JSON.parse((await storedReceipt(answer.body.data.receipt_id))!.mapped as string).currency).toBe("SEK");
  });

  it.each(["1.0", "1.1"] as const)("the OpenAPI document's DR Retail example maps, as v%s, to the model its receipt.created example shows", async (version) => {
    const mapped = await mappedOf({ name: "document", version, body: DR_RETAIL_EXAMPLE, mappedTotal: 19880 });
    expect(mapped).toEqual(DR_RETAIL_EXAMPLE_MAPPED);
  });

  it("a paid total that differs from the sum of the lines stays the total, the difference a line of its own", async () => {
    const receipt = structuredClone(byName("VAT at 25, 12 and 6"));
    receipt.body.totals.at(-1).amount = 200.3;
    const mapped = await mappedOf(receipt);
    expect(mapped.total).toBe(20030);
    expect(mapped.line_items.at(-1)).toEqual({ description: UNITEMISED, quantity: 1, unit_price: -3350, total: -3350 });
    expect(receiptModel.safeParse(mapped).error).toBeUndefined();
  });

  it("keeps our own shape the default: without a profile the same DR body is refused by our rules", async () => {
    const { headers } = await newCaller();
    const message = await expectRefused(() => postAdd(headers, byName("yen").body), 406, "Not Acceptable");
    expect(message).toContain("Body field purchased_at is missing");
  });
});

const card = (receipt: Record<string, any>) => receipt.payments[0].tender;

// Each class of broken rule: [label, version, change to a valid receipt, JSON pointer, rule].
const BROKEN: readonly (readonly [string, "1.0" | "1.1", (body: Record<string, any>) => void, string, string])[] = [
  ["a required field missing", "1.1", (b) => delete b.business_unit.service_id, "/business_unit/service_id", "is missing"],
  ["a wrong type", "1.0", (b) => (b.items[0].quantity.value = "2"), "/items/0/quantity/value", "must be a number"],
  ["a pattern", "1.1", (b) => (b.business_unit.service_id = "1559409755"), "/business_unit/service_id", "must be 10 digits and 32 hexadecimal digits"],
  ["an enum", "1.0", (b) => (b.items[0].quantity.unit = "box"), "/items/0/quantity/unit", "must be one of: ea, 6 pack"],
  ["an unknown kind of item", "1.1", (b) => (b.items[0].type = "gift"), "/items/0/type", "must be one of: sale, return, text, deposit"],
  ["an unknown top-level field", "1.1", (b) => (b.totl = []), "/totl", "is not a field of this version; check its spelling"],
  ["an unknown field where the schema allows none", "1.0", (b) => (b.payments[0].tender.colour = "red"), "/payments/0/tender/colour", "is not a field of this version"],
  ["a v1.1 card field sent as v1.0", "1.0", (b) => (b.payments[0].tender.card_acceptor_name = "Lindqvists"), "/payments/0/tender/card_acceptor_name", "is not a field of this version"],
  ["a minimum", "1.1", (b) => (b.totals[0].amount = -1), "/totals/0/amount", "must be 0 or more"],
  ["an integer", "1.0", (b) => (b.receipt_identifier.sequence_number = 1.5), "/receipt_identifier/sequence_number", "must be an integer"],
  ["one of two fields required", "1.1", (b) => (b.sales_recording_system = { serial_number: "EA38329" }), "/sales_recording_system/id", "is missing"],
  ["a date-time without offset", "1.0", (b) => (b.time_of_purchase = "2026-11-22T14:03:00"), "/time_of_purchase", "must be an RFC 3339 date-time"],
  ["two customer identifiers at once", "1.1", (b) => (b.customer = { id: { email: "a@example.com", phone: "+46701234567" } }), "/customer/id", "must hold exactly one of"],
  ["a priced line without its amount", "1.1", (b) => delete b.items[1].extended_amount, "/items/1/extended_amount", "is missing"],
  ["prices and points on one line", "1.0", (b) => (b.items[0].points = 10), "/items/0/points", "must not be given beside prices"],
  ["a v1.1 card pattern", "1.1", (b) => (card(b).card_acceptor_terminal_id = "1384871"), "/payments/0/tender/card_acceptor_terminal_id", "must be 8 letters, digits or hyphens"],
  ["more decimals than the currency has", "1.1", (b) => (b.items[0].extended_amount = 109.805), "/items/0/extended_amount", "has more than 2 decimals"],
  ["a decimal in a currency without", "1.0", (b) => ((b.currency = "JPY"), (b.items[0].actual_sales_unit_price = 54.9)), "/items/0/actual_sales_unit_price", "has more than 0 decimals"],
  ["a receipt-level replace", "1.0", (b) => (b.retail_price_modifiers = [{ amount: 10, action: "replace" }]), "/retail_price_modifiers/0/action", "replace has no amount"],
  ["a zero quantity", "1.1", (b) => ((b.items[0].quantity.value = 0)), "/items/0/quantity/value", "must not be 0"],
];

describe("docs/api.md#dr-retail add in DR Retail: 406 naming the JSON pointer of the first failing field", () => {
  it.each(BROKEN)("%s: 406 naming it, nothing stored", async (_label, version, change, pointer, rule) => {
    const body = structuredClone(byName("VAT at 25, 12 and 6").body);
    if (version === "1.0") for (const name of ["acquiring_institution_id_code", "card_acceptor_id", "card_acceptor_name"]) delete card(body)[name];
    change(body);
    const { headers } = await newCaller();
    const message = await expectRefused(() => postAdd({ ...headers, "Content-Type": drRetailContentType(version) }, body), 406, "Not Acceptable");
    expect(message).toContain(`Body field ${pointer} ${rule}`);
    expect(message).toContain(`(DR Retail v${version})`);
  });

  it.each([
    ["bank_identification_number", (b: Record<string, any>) => (card(b).bank_identification_number = "4111111111111111"), "/payments/0/tender/bank_identification_number"],
    ["a gift card's card_number", (b: Record<string, any>) => (b.payments[0].tender = { type: "giftcard", card_number: "4111 1111 1111 1111", current_balance: 0 }), "/payments/0/tender/card_number"],
  ])("a full card number in %s: 406, and neither the answer nor the log holds it", async (_label, change, pointer) => {
    const body = structuredClone(byName("VAT at 25, 12 and 6").body);
    change(body);
    const { headers } = await newCaller();
    let message = "";
    const logs = await loggedRequests(async () => {
      message = await expectRefused(() => postAdd({ ...headers, "Content-Type": drRetailContentType("1.1") }, body), 406, "Not Acceptable");
    });
    expect(message).toContain(`Body field ${pointer} holds a full card number`);
    for (const text of [message, JSON.stringify(logs)]) expect(text.replaceAll(" ", "")).not.toContain("4111111111111111");
  });

  // 2^53 − 1 minor units, in kronor.
  const LARGEST = 90071992547409.91;
  const largeSale = (sequence: number) => ({ ...structuredClone(byName("VAT at 25").body.items[0]), sequence_number: sequence, actual_sales_unit_price: LARGEST, extended_gross_amount: LARGEST, extended_amount: LARGEST, quantity: { value: 1, unit: "ea" } });
  it.each([
    ["a sale's negative tax_percentage", (b: Record<string, any>) => (b.items[1].tax_percentage = -25), "/items/1/tax_percentage", "line_items[1].vat_rate", "must be a percentage from 0 to 100"],
    ["a price modifier's negative tax_percentage", (b: Record<string, any>) => (b.retail_price_modifiers = [{ amount: 0, action: "add", tax_percentage: -5 }]), "/retail_price_modifiers/0/tax_percentage", "line_items[3].vat_rate", "must be a percentage from 0 to 100"],
    ["a sale's tax_percentage above 100", (b: Record<string, any>) => (b.items[0].tax_percentage = 125), "/items/0/tax_percentage", "line_items[0].vat_rate", "must be a percentage from 0 to 100"],
    ["a VAT sub-total's tax_percentage above 100", (b: Record<string, any>) => (b.totals[1].sub_totals[2].tax_percentage = 600), "/totals/1/sub_totals/2/tax_percentage", "vat[2].rate", "must be a percentage from 0 to 100"],
    ["a deposit's negative tax_percentage", (b: Record<string, any>) => b.items.push({ type: "deposit", sequence_number: 4, unit_amount: 0, amount: 0, quantity: 1, refund: false, tax_percentage: -12 }), "/items/3/tax_percentage", "line_items[3].vat_rate", "must be a percentage from 0 to 100"],
    ["two lines of 2^53 − 1 minor units against a paid total of 0", (b: Record<string, any>) => ((b.items = [largeSale(1), largeSale(2)]), (b.totals = [{ type: "paid", amount: 0 }])), "/totals/0/amount", "line_items[2].unit_price", "must be an integer of minor units from -9007199254740991 to 9007199254740991"],
    ["three lines of 2^53 − 1 minor units against a paid total of 0", (b: Record<string, any>) => ((b.items = [largeSale(1), largeSale(2), largeSale(3)]), (b.totals = [{ type: "paid", amount: 0 }])), "/totals/0/amount", "line_items[3].unit_price", "must be an integer of minor units"],
  ])("%s maps to a receipt our own rules refuse: 406 naming the DR field, nothing stored", async (_label, change, pointer, modelField, rule) => {
    const body = structuredClone(byName("VAT at 25, 12 and 6").body);
    change(body);
    const { headers } = await newCaller();
    const before = await rowCounts();
    const message = await expectRefused(() => postAdd({ ...headers, "Content-Type": drRetailContentType("1.1") }, body), 406, "Not Acceptable");
    expect(message).toContain(`Body field ${pointer} maps to ${modelField} of our receipt model, which ${rule}`);
    expect(message).toContain("(DR Retail v1.1)");
    expect(await rowCounts()).toEqual(before);
  });

  // One Luhn-valid number, 4111 1111 1111 1111, written each way a card-number field must see through.
  const PAN_FORMS = [
    ["hyphens U+2010", "4111\u20101111\u20101111\u20101111"],
    ["points", "4111.1111.1111.1111"],
    ["full-width digits", "４１１１１１１１１１１１１１１１"],
    ["Arabic-Indic digits", "٤١١١١١١١١١١١١١١١"],
    ["padded with zeros", "00004111111111111111"],
    ["a trailing letter", "4111111111111111A"],
    ["slashes and a no-break space", "4111/1111/1111\u00a01111"],
    ["its expiry after it, as free text is masked", "4111 1111 1111 1111, 12/28"],
  ] as const;
  const CARD_FIELDS = [
    ["bank_identification_number", (b: Record<string, any>, pan: string) => (card(b).bank_identification_number = pan), "/payments/0/tender/bank_identification_number"],
    ["a gift card's card_number", (b: Record<string, any>, pan: string) => (b.payments[0].tender = { type: "giftcard", card_number: pan, current_balance: 0 }), "/payments/0/tender/card_number"],
  ] as const;
  describe.each(CARD_FIELDS)("a full card number in %s, however written", (_field, put, pointer) => {
    it.each(PAN_FORMS)("with %s: 406 naming the field, the number never repeated", async (_form, pan) => {
      const body = structuredClone(byName("VAT at 25, 12 and 6").body);
      put(body, pan);
      const { headers } = await newCaller();
      let message = "";
      const logs = await loggedRequests(async () => {
        message = await expectRefused(() => postAdd({ ...headers, "Content-Type": drRetailContentType("1.1") }, body), 406, "Not Acceptable");
      });
      expect(message).toContain(`Body field ${pointer} holds a full card number`);
      for (const text of [message, JSON.stringify(logs)]) expect(text).not.toContain(pan);
    });
  });

  it("a masked number whose shown digits would pass the Luhn check joined is no full number: 200", async () => {
    const body = structuredClone(byName("VAT at 25, 12 and 6").body);
    card(body).bank_identification_number = "41111111****0002";
    const { answer } = await addDr({ version: "1.1", body });
    expect(answer.status).toBe(200);
  });

  it.each([
    ["a card token's value", (b: Record<string, any>) => (card(b).card_token.value = "4111111111111111"), "/payments/0/tender/card_token/value", "411111******1111"],
    ["an item's description", (b: Record<string, any>) => (b.items[0].description = "Bryggkaffe, kort 4111 1111 1111 1111"), "/items/0/description", "Bryggkaffe, kort 4111 11** **** 1111"],
    ["a line of the payment slip", (b: Record<string, any>) => (card(b).payment_slip.collection[1] = "Kort: 5555-5555-5555-4444"), "/payments/0/tender/payment_slip/collection/1", "Kort: 5555-55**-****-4444"],
    ["the footer text", (b: Record<string, any>) => (b.footer_text = { type: "array", collection: ["Amex 3782 822463 10005"] }), "/footer_text/collection/0", "Amex 3782 82**** *0005"],
    ["a free member of customer", (b: Record<string, any>) => (b.customer = { note: "４１１１ １１１１ １１１１ １１１１" }), "/customer/note", "４１１１ １１** **** １１１１"],
  ])("a full card number in free text, in %s: stored masked, first six and last four kept, the answer naming it", async (_label, change, pointer, masked) => {
    const body = structuredClone(byName("VAT at 25, 12 and 6").body);
    change(body);
    const { answer } = await addDr({ version: "1.1", body });
    expect(answer.status, JSON.stringify(answer.body)).toBe(200);
    expect(answer.body.data.masked_fields).toEqual([pointer]);
    const original = JSON.parse((await storedReceipt(answer.body.data.receipt_id))!.body as string);
    expect(pointer.split("/").slice(1).reduce((value: any, key) => value[key], original)).toBe(masked);
  });

  it("Kivra's example of a tender of type other with a barcode, whose invoice number passes the Luhn check: stored, mapped and pushed with it masked, the answer naming it", async () => {
    const body = structuredClone(byName("purchase order, accounts receivable").body);
    const klarna = body.payments.find(({ tender }: any) => tender.type === "other").tender;
    klarna.tender_details.collection.push("Fakturanr: 2260 6633 2099 9960");
    const { answer } = await addDr({ version: "1.0", body });
    expect(answer.status, JSON.stringify(answer.body)).toBe(200);
    expect(answer.body.data.masked_fields).toEqual(["/payments/4/tender/tender_details/collection/1"]);
    klarna.tender_details.collection[1] = "Fakturanr: 2260 66** **** 9960";
    const row = (await storedReceipt(answer.body.data.receipt_id))!;
    expect(row.body).toBe(JSON.stringify(body));
    expect(JSON.parse(row.mapped as string).total).toBe(byName("purchase order, accounts receivable").mappedTotal);
    const [push] = await waitForPushes(answer.body.data.receipt_id, 1, 30_000);
    expect(push!.body).not.toContain("2260 6633 2099 9960");
    expect(JSON.parse(push!.body).original).toEqual(body);
  }, 60_000);

  it("what only looks like a card number in free text is stored: a GTIN, a phone number, a date-led receipt number, digits inside a token", async () => {
    const body = structuredClone(byName("VAT at 25, 12 and 6").body);
    // Each passes the Luhn check: the GTIN by its own check digit, the rest by chance.
    body.items[0].identifiers[0].value = "4006381333924";
    body.items[0].description = "Bryggkaffe EAN 4006381333924";
    body.business_unit.contact.phone = "+49 1512 3456704";
    body.receipt_identifier.extended_number.value = "20261122-0042-7-000108";
    card(body).card_token.value = "0bbe7c68d1b5536ee5b1ef2218a4111111111111111b383bbfbd1b4bf17c";
    const { answer } = await addDr({ version: "1.1", body });
    expect(answer.status, JSON.stringify(answer.body)).toBe(200);
  });

  it("16 digits that fail the Luhn check are no card number: 200", async () => {
    const body = structuredClone(byName("VAT at 25, 12 and 6").body);
    card(body).bank_identification_number = "4111111111111112";
    const { answer } = await addDr({ version: "1.1", body });
    expect(answer.status).toBe(200);
  });

  it("a profile the service does not read: 415 naming the profiles it reads", async () => {
    const { headers } = await newCaller();
    const contentType = "application/json;profile=https://se.receipts.kivra.com/schemas/json/retail/v1.2";
    const message = await expectRefused(() => postAdd({ ...headers, "Content-Type": contentType }, byName("yen").body), 415, "Unsupported Media Type");
    expect(message).toContain("https://se.receipts.kivra.com/schemas/json/retail/v1.1");
  });

  const V10 = "https://se.digitalreceipts.net/schemas/json/retail/v1.0";
  const V11 = "https://se.receipts.kivra.com/schemas/json/retail/v1.1";
  it.each([
    ["profile twice", `application/json;profile=${V11};profile=${V10}`, "profile"],
    ["profile twice, once quoted and in upper case", `application/json; profile="${V11}"; PROFILE=${V11}`, "profile"],
    ["charset twice", `application/json;charset=utf-8;profile=${V11};charset=utf-8`, "charset"],
    ["another parameter twice", `application/json;profile=${V11};v=1;v=2`, "v"],
  ])("a media-type parameter sent more than once (%s): 415 naming it, nothing stored", async (_label, contentType, name) => {
    const { headers } = await newCaller();
    const before = await rowCounts();
    const message = await expectRefused(() => postAdd({ ...headers, "Content-Type": contentType }, byName("VAT at 25").body), 415, "Unsupported Media Type");
    expect(message).toContain(`Header Content-Type has the parameter ${name} more than once`);
    expect(await rowCounts()).toEqual(before);
  });

  it.each([
    ["no value", "application/json;profile"],
    ["an empty value", "application/json; profile="],
    ["an empty quoted value", 'application/json; profile=""'],
  ])("a profile with %s: 415 naming profile, not read as our shape", async (_label, contentType) => {
    const { headers } = await newCaller();
    const message = await expectRefused(() => postAdd({ ...headers, "Content-Type": contentType }, validReceiptBody()), 415, "Unsupported Media Type");
    expect(message).toContain("Header Content-Type has the parameter profile without a value");
    expect(message).toContain(V11);
  });

  it("a profile quoted with a semicolon inside is one value, not two parameters: 415 as a profile the service does not read", async () => {
    const { headers } = await newCaller();
    const message = await expectRefused(() => postAdd({ ...headers, "Content-Type": `application/json;profile="${V11};x"` }, byName("VAT at 25").body), 415, "Unsupported Media Type");
    expect(message).toContain("names a profile this service does not read");
  });

  it("an empty parameter, as RFC 9110 allows, changes nothing: 200", async () => {
    const { headers } = await newCaller();
    expect((await postAdd({ ...headers, "Content-Type": `application/json;;profile=${V11};` }, byName("VAT at 25").body)).status).toBe(200);
  });

  it("a DR body over 64 KiB: 413 as for our shape; at 64 KiB it is stored as sent", async () => {
    const text = JSON.stringify(byName("yen").body);
    const padded = (size: number) => text + " ".repeat(size - new TextEncoder().encode(text).byteLength);
    const { headers } = await newCaller();
    const dr = { ...headers, "Content-Type": drRetailContentType("1.0") };
    await expectRefused(() => postAdd(dr, padded(64 * 1024 + 1)), 413, "Payload Too Large");
    const answer = await postAdd(dr, padded(64 * 1024));
    expect(answer.status).toBe(200);
    expect((await storedReceipt(answer.body.data.receipt_id))!.body).toBe(padded(64 * 1024));
  });

  it("an amount with more digits than a double holds is read from its own digits: refused, not rounded to 109.80", async () => {
    const receipt = byName("VAT at 25, 12 and 6");
    const text = JSON.stringify(receipt.body).replace('"extended_amount":109.8,', '"extended_amount":109.80000000000000001,');
    expect(text).toContain("109.80000000000000001");
    const { headers } = await newCaller();
    const message = await expectRefused(() => postAdd({ ...headers, "Content-Type": drRetailContentType("1.1") }, text), 406, "Not Acceptable");
    expect(message).toContain("Body field /items/0/extended_amount has more than 2 decimals");
  });

  it("a body with a long run of digits elsewhere (a 16-digit loyalty number) maps exactly the same", async () => {
    const receipt = structuredClone(byName("loyalty member"));
    receipt.body.customer.id.loyalty.customer_number = "1111222233334444";
    const mapped = await mappedOf(receipt);
    expect(mapped.total).toBe(receipt.mappedTotal);
    expect(mapped.line_items.map(({ total }: { total: number }) => total)).toEqual([6863, 2994, 0, -1000]);
  });

  it("a body that is not I-JSON gets the same 406 as in our shape", async () => {
    const text = JSON.stringify(byName("yen").body).replace('"currency":"JPY"', '"currency":"JPY","currency":"SEK"');
    const { headers } = await newCaller();
    const message = await expectRefused(() => postAdd({ ...headers, "Content-Type": drRetailContentType("1.0") }, text), 406, "Not Acceptable");
    expect(message).toContain("Body field currency appears more than once in one object");
  });

  it("one Idempotency-Key with one body as v1.0 and then as v1.1: 409, they are different requests", async () => {
    const receipt = byName("yen");
    const { headers } = await newCaller();
    const keyed = { ...headers, "Idempotency-Key": uniqueId("key") };
    expect((await postAdd({ ...keyed, "Content-Type": drRetailContentType("1.0") }, receipt.body)).status).toBe(200);
    expect((await postAdd({ ...keyed, "Content-Type": drRetailContentType("1.0") }, receipt.body)).status).toBe(200);
    await expectRefused(() => postAdd({ ...keyed, "Content-Type": drRetailContentType("1.1") }, receipt.body), 409, "Conflict");
  });
});
