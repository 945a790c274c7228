/**
 * Receipt bodies for add, valid by docs/api.md#add: the totals add up, every field within its rule.
 * Sized by the number of line items, as a real receipt grows.
 */

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
