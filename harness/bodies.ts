/**
 * Receipt bodies for add, valid by docs/api.md#add: the totals add up, every field within its rule.
 * Sized by the number of line items, as a real receipt grows. Also in DR Retail
 * (docs/api.md#dr-retail), valid in v1.0 and v1.1, its paid total the sum of its lines.
 */
import { DR_EXAMPLE_STORE } from "../src/api/openapi/documented-operations.ts";

/** A receipt of about `targetBytes` of JSON (never more than 500 line items). */
export function receiptBody(targetBytes: number): string {
  const lineItems: LineItem[] = [];
  let size = JSON.stringify(receipt(lineItems)).length;
  while (size < targetBytes && lineItems.length < MAX_LINE_ITEMS) {
    const item = lineItem(lineItems.length + 1);
    lineItems.push(item);
    size += JSON.stringify(item).length + 1;
  }
  return JSON.stringify(receipt(lineItems));
}

const MAX_LINE_ITEMS = 500;

interface LineItem {
  description: string;
  quantity: number;
  unit_price: number;
  total: number;
  sku: string;
  vat_rate: number;
}

function lineItem(n: number): LineItem {
  const quantity = (n % 3) + 1;
  const unitPrice = 99 + ((n * 37) % 900);
  return {
    description: `Item ${n}: organic whole milk, 1 l carton, from the regional dairy cooperative`,
    quantity,
    unit_price: unitPrice,
    total: quantity * unitPrice,
    sku: `SKU-${String(n).padStart(8, "0")}`,
    vat_rate: n % 2 === 0 ? 7 : 19,
  };
}

function receipt(lineItems: LineItem[]) {
  const total = lineItems.reduce((sum, item) => sum + item.total, 0);
  return {
    purchased_at: "2026-11-20T14:03:27+01:00",
    currency: "EUR",
    total,
    line_items: lineItems,
    store_id: "store-0042",
    pos_receipt_number: "0042-2026-000123",
    payments: [{ method: "card", amount: total }],
    metadata: { till: "7", cashier: "c-118" },
  };
}

/**
 * A DR Retail receipt of about `targetBytes` of JSON, valid in v1.0 and v1.1, whose
 * `receipt_identifier.extended_number.value` (our model's pos_receipt_number) is `number`:
 * sales at 12 and 25 % VAT paid by card. Amounts are whole öre divided by 100, so each JSON
 * number is the exact decimal it stands for; the total in our model is returned beside it.
 */
export function drRetailReceipt(targetBytes: number, number = "0042-3-000123"): { body: Record<string, unknown>; total: number } {
  const items: Record<string, unknown>[] = [];
  let total = 0;
  let size = JSON.stringify(drReceipt(items, 0, number)).length;
  while (size < targetBytes && items.length < MAX_LINE_ITEMS) {
    const n = items.length + 1;
    const quantity = (n % 3) + 1;
    const unitOre = 990 + ((n * 37) % 9000);
    const item = {
      type: "sale",
      sequence_number: n,
      identifiers: [{ identifier_type: "gtin", value: `7310${String(n).padStart(9, "0")}` }],
      description: `Item ${n}: organic whole milk, 1 l carton`,
      quantity: { value: quantity, unit: "ea" },
      actual_sales_unit_price: unitOre / 100,
      extended_gross_amount: (quantity * unitOre) / 100,
      extended_amount: (quantity * unitOre) / 100,
      tax_percentage: n % 2 === 0 ? 12 : 25,
    };
    items.push(item);
    total += quantity * unitOre;
    size += JSON.stringify(item).length + 1;
  }
  return { body: drReceipt(items, total, number), total };
}

function drReceipt(items: Record<string, unknown>[], totalOre: number, number: string) {
  return {
    ...DR_EXAMPLE_STORE,
    receipt_identifier: { sequence_number: 123, extended_number: { value: number, context: "chain" } },
    time_of_purchase: "2026-11-20T14:03:27+01:00",
    currency: "SEK",
    items,
    totals: [
      { type: "gross", amount: totalOre / 100 },
      { type: "paid", amount: totalOre / 100 },
    ],
    payments: [{ amount: totalOre / 100, tender: { type: "creditdebit", bank_identification_number: "527500******7651" } }],
  };
}
