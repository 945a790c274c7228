/**
 * DR Retail test receipts, written from Kivra's field reference (docs/api.md#dr-retail): each
 * tender type, a return with its reference, VAT at several rates, loyalty, a foreign-currency
 * payment, rounding and a currency without decimals, in both versions. Each carries the total our
 * model must map it to, worked out by hand in minor units.
 */
import type { DrRetailVersion } from "../../src/shared/dr-retail-profiles.ts";

/** One test receipt: its name, version, body and the total in minor units it maps to. */
export interface DrTestReceipt {
  name: string;
  version: DrRetailVersion;
  body: Record<string, any>;
  mappedTotal: number;
}

/** The parts every receipt of the store shares, with its own number and currency. */
function receipt(sequence: number, currency = "SEK"): Record<string, any> {
  return {
    business_unit: {
      name: "Lindqvists Livs",
      service_id: "15594097555922f97bfeb148d6b9a6ef76f76ebdce",
      unit_id: "store-0042",
      organization_number: "556677-8899",
      contact: {
        address: { street_address: "Storgatan 1", locality: "Uppsala", postal_code: "753 20" },
        phone: "+46 18 123 456",
        email: "kassa@lindqvists.example",
      },
    },
    cashier: { id: "5", name: "Anna" },
    sales_recording_system: { id: "k3", name: "Kassa 3", serial_number: "EA38329" },
    receipt_identifier: { sequence_number: sequence, extended_number: { value: `0042-3-${String(sequence).padStart(6, "0")}`, type: "EAN13", context: "store" } },
    time_of_purchase: "2026-11-22T14:03:00+01:00",
    currency,
    control_unit: { id: "RIHTT102710007088", code: "BGXOV2QOHHILXHLPHHXRAYZEKGFNC2BD;" },
  };
}

/** A priced sale line: `amount` is what the shopper pays for it after any discount on it. */
function sale(sequence: number, description: string, quantity: number, unitPrice: number, amount: number, tax: number, unit = "ea"): Record<string, any> {
  return {
    type: "sale",
    sequence_number: sequence,
    identifiers: [{ identifier_type: "gtin", value: `73100000${String(sequence).padStart(5, "0")}` }],
    description,
    quantity: { value: quantity, unit, entry_method: unit === "kg" ? "weighed" : "scanned" },
    regular_sales_unit_price: unitPrice,
    actual_sales_unit_price: unitPrice,
    extended_gross_amount: amount,
    extended_amount: amount,
    tax_percentage: tax,
  };
}

function vat(amount: number, ...rates: [rate: number, vat: number, taxable: number][]): Record<string, any> {
  return {
    type: "vat",
    amount,
    sub_totals: rates.map(([rate, vatAmount, taxable]) => ({
      amount: vatAmount,
      taxable_amount: taxable,
      net_amount: Math.round((taxable - vatAmount) * 100) / 100,
      tax_percentage: rate,
    })),
  };
}

const cash = { type: "cash" };

/** Every test receipt. */
export function drTestReceipts(): DrTestReceipt[] {
  return [
    {
      name: "VAT at 25, 12 and 6 % paid by card (v1.1 card fields, token)",
      version: "1.1",
      mappedTotal: 23380,
      body: {
        ...receipt(117),
        items: [sale(1, "Bryggkaffe 500 g", 2, 54.9, 109.8, 12), sale(2, "Batterier AA 4-pack", 1, 89.0, 89.0, 25), sale(3, "Dagens Nyheter", 1, 35.0, 35.0, 6)],
        totals: [
          { type: "net", amount: 202.26 },
          vat(31.54, [12, 11.76, 109.8], [25, 17.8, 89.0], [6, 1.98, 35.0]),
          { type: "gross", amount: 233.8 },
          { type: "paid", amount: 233.8 },
        ],
        payments: [
          {
            amount: 233.8,
            amount_applied_to_bill: 233.8,
            tender: {
              type: "creditdebit",
              bank_identification_number: "527500******7651",
              acquiring_institution_id_code: "722660",
              retrieval_reference_number: "996933866525",
              card_acceptor_id: "8056101",
              card_acceptor_terminal_id: "13848718",
              card_acceptor_name: "Lindqvists Livs",
              approval_code: "123456",
              card_token: { value: "0bbe7c68d1b5536ee5b1ef221816817d321dc1bff61c377b383bbfbd1b4bf17c", scheme: "par" },
              payment_slip: { type: "array", collection: ["Lindqvists Livs", "Köp 233,80 SEK", "Godkänd"] },
            },
          },
        ],
      },
    },
    {
      name: "cash, rounded to whole kronor, change given",
      version: "1.0",
      mappedTotal: 5600,
      body: {
        ...receipt(118),
        items: [sale(1, "Surdegsbröd", 1, 32.9, 32.9, 12), sale(2, "Mellanmjölk 1 l", 2, 11.45, 22.9, 12)],
        totals: [
          { type: "net", amount: 49.82 },
          vat(5.98, [12, 5.98, 55.8]),
          { type: "gross", amount: 55.8 },
          { type: "rounding", amount: 0.2 },
          {
            type: "paid",
            amount: 56.0,
            sub_totals: [
              { type: "received", amount: 100.0, text: { type: "array", collection: ["Mottaget"] } },
              { type: "returned", amount: 44.0, text: { type: "array", collection: ["Växel"] } },
            ],
          },
        ],
        payments: [
          { tender: cash, amount: 100.0, amount_applied_to_bill: 55.8, rounding: 0.2 },
          { tender: cash, amount: 44.0, refund: true },
        ],
      },
    },
    {
      name: "return with its receipt_reference, refunded in cash",
      version: "1.1",
      mappedTotal: -10000,
      body: {
        ...receipt(119),
        items: [
          {
            ...sale(1, "Kingston USB-minne 8 GB", 1, 145, 100, 25),
            type: "return",
            actual_sales_unit_price: 100,
            extended_gross_amount: 145,
            retail_price_modifiers: [{ amount: 45, description: { type: "array", collection: ["Kampanj"] } }],
            receipt_reference: { value: "0042-3-000117", type: "EAN13", context: "store" },
          },
        ],
        totals: [
          { type: "net", amount: 80, refund: true },
          { ...vat(20, [25, 20, 100]), refund: true },
          { type: "gross", amount: 145, refund: true },
          { type: "paid", amount: 100, refund: true },
        ],
        payments: [{ tender: cash, amount: 100, refund: true }],
      },
    },
    {
      name: "loyalty member: weighed goods, member discount, points line, bonus cheque and card",
      version: "1.0",
      mappedTotal: 8857,
      body: {
        ...receipt(120),
        items: [
          sale(1, "Västerbottensost", 0.532, 129.0, 68.63, 12, "kg"),
          sale(2, "Apelsiner", 1.2, 24.95, 29.94, 12, "kg"),
          { type: "sale", sequence_number: 3, identifiers: [{ identifier_type: "pos", value: "BONUS" }], description: "Bonuspoäng kampanj", quantity: { value: 1, unit: "ea" }, points: 200 },
        ],
        retail_price_modifiers: [{ amount: 10.0, action: "subtract", tax_percentage: 12, description: { type: "array", collection: ["Medlemsrabatt"] }, item_links: [1, 2] }],
        totals: [
          { type: "net", amount: 79.08 },
          vat(9.49, [12, 9.49, 88.57]),
          { type: "gross", amount: 98.57, sub_totals: [{ type: "eligible_for_frequent_shopper_points", amount: 88.57, points: 88 }] },
          { type: "discount", amount: 10.0, refund: true, sub_totals: [{ type: "loyalty", amount: 10.0, refund: true }] },
          { type: "loyalty", amount: 50.0 },
          { type: "paid", amount: 88.57 },
        ],
        payments: [
          { amount: 50.0, tender: { type: "loyalty", loyalty_program: "Stammis", points_redeemed: 5000, amount_redeemed: 50.0 } },
          { amount: 38.57, tender: { type: "creditdebit", bank_identification_number: "457173******1234", card_acceptor_terminal_id: "13848718", approval_code: "A1B2C3" } },
        ],
        customer: { id: { loyalty: { program: "Stammis", level: "guld", customer_number: "7350001234567", current_count: 1200, target_count: 1500 } } },
      },
    },
    {
      name: "foreign currency: a SEK receipt paid in euro notes",
      version: "1.1",
      mappedTotal: 11900,
      body: {
        ...receipt(121),
        items: [sale(1, "Mugg Uppsala", 1, 119.0, 119.0, 25)],
        totals: [{ type: "net", amount: 95.2 }, vat(23.8, [25, 23.8, 119.0]), { type: "gross", amount: 119.0 }, { type: "paid", amount: 119.0 }],
        payments: [{ tender: cash, amount: 119.0, amount_applied_to_bill: 119.0, foreign_currency_amount: { currency: "EUR", original_face_amount: 10.5, exchange_rate: 11.3333 } }],
      },
    },
    {
      name: "gift card (masked) and cash",
      version: "1.0",
      mappedTotal: 26400,
      body: {
        ...receipt(122),
        items: [sale(1, "Pocketbok", 1, 249.0, 249.0, 6), sale(2, "Presentinslagning", 1, 15.0, 15.0, 25)],
        totals: [{ type: "net", amount: 246.9 }, vat(17.1, [6, 14.1, 249.0], [25, 3.0, 15.0]), { type: "gross", amount: 264.0 }, { type: "paid", amount: 264.0 }],
        payments: [
          { amount: 200.0, tender: { type: "giftcard", card_number: "603628******4321", expiration_date: "2027-12-31", initial_balance: 200.0, current_balance: 0.0 } },
          { amount: 64.0, tender: cash },
        ],
      },
    },
    {
      name: "Swish mobile payment with bottle deposits, customer by phone",
      version: "1.1",
      mappedTotal: 8340,
      body: {
        ...receipt(123),
        items: [
          sale(1, "Läsk 33 cl", 6, 12.9, 77.4, 12),
          { type: "deposit", sequence_number: 2, item_link: 1, description: "Pant", unit_amount: 1.0, amount: 6.0, quantity: 6, refund: false, tax_percentage: 12 },
        ],
        totals: [{ type: "net", amount: 74.46 }, vat(8.94, [12, 8.94, 83.4]), { type: "gross", amount: 83.4 }, { type: "paid", amount: 83.4 }],
        payments: [
          {
            amount: 83.4,
            tender: {
              type: "mobile",
              provider: "swish:pay",
              phone: "+46701234567",
              tender_details: { type: "map", collection: { paymentReference: "6D6CD7406ECE4542A80152D909EF9F6B", status: "PAID" } },
            },
          },
        ],
        customer: { id: { phone: "+46 70 123 45 67" } },
      },
    },
    {
      name: "coupon as payment, rest by card",
      version: "1.1",
      mappedTotal: 2580,
      body: {
        ...receipt(124),
        items: [sale(1, "Läkerol Cassis", 2, 12.9, 25.8, 12)],
        totals: [{ type: "net", amount: 23.04 }, vat(2.76, [12, 2.76, 25.8]), { type: "gross", amount: 25.8 }, { type: "paid", amount: 25.8 }],
        payments: [
          { amount: 3.0, amount_applied_to_bill: 3.0, tender: { type: "coupon", name: "LÄKEROL 3:-", coupon_code: "", coupon_value: 3.0, item_links: [1] } },
          { amount: 22.8, tender: { type: "creditdebit", bank_identification_number: "************3602" } },
        ],
      },
    },
    {
      name: "purchase order, accounts receivable, house account, voucher and other (Klarna)",
      version: "1.0",
      mappedTotal: 234450,
      body: {
        ...receipt(125),
        items: [sale(1, "Kontorsstol", 1, 1995.0, 1995.0, 25), sale(2, "Skrivbordslampa", 1, 349.5, 349.5, 25)],
        totals: [{ type: "net", amount: 1875.6 }, vat(468.9, [25, 468.9, 2344.5]), { type: "gross", amount: 2344.5 }, { type: "paid", amount: 2344.5 }],
        payments: [
          { amount: 1000.0, tender: { type: "purchase_order", tender_details: { type: "array", collection: ["Order 4711"] } } },
          { amount: 500.0, tender: { type: "accounts_receivable" } },
          { amount: 300.0, tender: { type: "house_account" } },
          { amount: 244.5, tender: { type: "voucher" } },
          {
            amount: 300.0,
            tender: {
              type: "other",
              type_name: "KLARNA",
              tender_details: { type: "array", collection: ["Butiksnr: 8708"], barcode: { value: "$EPAY${\"Butiknr\":\"8708\"}", type: "QRCode" } },
            },
          },
        ],
      },
    },
    {
      name: "yen: a currency without decimals",
      version: "1.0",
      mappedTotal: 1280,
      body: {
        ...receipt(126, "JPY"),
        items: [sale(1, "Matcha", 1, 1280, 1280, 10)],
        totals: [{ type: "net", amount: 1164 }, vat(116, [10, 116, 1280]), { type: "gross", amount: 1280 }, { type: "paid", amount: 1280 }],
        payments: [{ amount: 1280, tender: cash }],
      },
    },
  ];
}
