/** add: refusals of its body: media type (415), size (413), JSON (406) and the field rules. */
import { describe, expect, it } from "vitest";
import {
  call,
  expectRefused,
  loggedRequests,
  newCaller,
  postAdd,
  uniqueId,
  validReceiptBody,
} from "../../support/api.ts";
import { PATHS } from "../../../src/shared/paths.ts";
import { storedReceipt } from "../../support/shards.ts";

const MAX_BODY_BYTES = 64 * 1024;

describe("docs/api.md#add-body add content type: 415", () => {
  it.each([
    "text/plain",
    "text/plain;charset=UTF-8",
    "application/x-www-form-urlencoded",
    "multipart/form-data; boundary=x",
    "application/jsonx",
    "application/ld+json",
    "application/json; charset=iso-8859-1",
  ])("Content-Type %s: 415 naming Content-Type and nothing stored", async (contentType) => {
    const { headers } = await newCaller();
    const message = await expectRefused(
      () => postAdd({ ...headers, "Content-Type": contentType }),
      415,
      "Unsupported Media Type",
    );
    expect(message).toContain("Content-Type");
    expect(message).toContain("application/json");
  });

  it("comes before the size: a large body of another type is a 415", async () => {
    const { headers } = await newCaller();
    await expectRefused(
      () => postAdd({ ...headers, "Content-Type": "text/csv" }, "x".repeat(MAX_BODY_BYTES + 1)),
      415,
      "Unsupported Media Type",
    );
  });
});

describe("docs/api.md#add-body add size limit: 413 above 64 KiB, checked before parsing", () => {
  // JSON allows white space after the value, so a valid body can be padded to any size.
  const padded = (size: number) => {
    const text = JSON.stringify(validReceiptBody());
    return text + " ".repeat(size - new TextEncoder().encode(text).byteLength);
  };

  it("accepts exactly 65536 bytes and stores them as given", async () => {
    const { headers } = await newCaller();
    const text = padded(MAX_BODY_BYTES);
    const answer = await postAdd(headers, text);
    expect(answer.status).toBe(200);
    expect((await storedReceipt(answer.body.data.receipt_id))?.body).toBe(text);
  });

  it("refuses 65537 bytes by their Content-Length before reading them", async () => {
    const { headers } = await newCaller();
    let message = "";
    const lines = await loggedRequests(async () => {
      message = await expectRefused(() => postAdd(headers, padded(MAX_BODY_BYTES + 1)), 413, "Payload Too Large");
    });
    expect(message).toContain("64 KiB");
    expect(lines.find((line) => line.event === "request" && line.status === 413)?.cause).toBe("declared length");
  });

  const stream = (size: number) =>
    new ReadableStream<Uint8Array>({
      start(controller) {
        for (let sent = 0; sent < size; sent += 16_384) controller.enqueue(new Uint8Array(Math.min(16_384, size - sent)).fill(32));
        controller.close();
      },
    });

  it.each([
    ["no Content-Length (a stream)", {}],
    ["a Content-Length that lies", { "Content-Length": "10" }],
  ])("counts the bytes as they arrive, so %s cannot bypass the limit", async (_label, extra) => {
    const { headers } = await newCaller();
    let message = "";
    const lines = await loggedRequests(async () => {
      message = await expectRefused(
        () => call(PATHS.add, { headers: { ...headers, ...extra }, body: stream(MAX_BODY_BYTES + 1) }),
        413,
        "Payload Too Large",
      );
    });
    expect(message).toContain("64 KiB");
    expect(lines.find((line) => line.event === "request" && line.status === 413)?.cause).toBe("streamed length");
  });

  it("comes before JSON: an over-long body that is not JSON is a 413", async () => {
    const { headers } = await newCaller();
    await expectRefused(() => postAdd(headers, "{".repeat(MAX_BODY_BYTES + 1)), 413, "Payload Too Large");
  });
});

describe("docs/api.md#add-body add body: 406 for a body that is not one JSON object", () => {
  it.each([
    ["empty", ""],
    ["white space", "  \n"],
    ["broken JSON", '{"currency": "EUR",'],
    ["not JSON", "currency=EUR"],
    ["two JSON values", "{} {}"],
  ])("%s: 406 naming the body", async (_label, text) => {
    const { headers } = await newCaller();
    const message = await expectRefused(() => postAdd(headers, text), 406, "Not Acceptable");
    expect(message).toMatch(/^Body is (empty|not valid JSON)/);
  });

  it.each([["an array", "[]"], ["null", "null"], ["a string", '"receipt"'], ["a number", "42"]])(
    "%s: 406 saying the body must be one JSON object",
    async (_label, text) => {
      const { headers } = await newCaller();
      const message = await expectRefused(() => postAdd(headers, text), 406, "Not Acceptable");
      expect(message).toMatch(/^Body must be one JSON object\./);
    },
  );

  it("bytes that are not UTF-8: 406 naming the body", async () => {
    const { headers } = await newCaller();
    const bytes = new Uint8Array([0x7b, 0x22, 0xff, 0xfe, 0x22, 0x7d]);
    const message = await expectRefused(() => call(PATHS.add, { headers, body: bytes }), 406, "Not Acceptable");
    expect(message).toContain("Body is not valid UTF-8");
  });
});

type Mutation = (body: Record<string, any>) => void;

/** One failing case per rule of the table in docs/api.md#add-body: [case, change, field path named, reason]. */
const BROKEN_RULES: [string, Mutation, string, string][] = [
  ["purchased_at missing", (b) => delete b.purchased_at, "purchased_at", "is missing"],
  ["purchased_at a number", (b) => (b.purchased_at = 1763816580), "purchased_at", "must be a string"],
  ["purchased_at without offset", (b) => (b.purchased_at = "2026-11-22T14:03:00"), "purchased_at", "RFC 3339"],
  ["purchased_at without seconds", (b) => (b.purchased_at = "2026-11-22T14:03+01:00"), "purchased_at", "RFC 3339"],
  ["purchased_at a date only", (b) => (b.purchased_at = "2026-11-22"), "purchased_at", "RFC 3339"],
  ["purchased_at a day that does not exist", (b) => (b.purchased_at = "2026-02-29T10:00:00Z"), "purchased_at", "RFC 3339"],
  ["purchased_at hour 24", (b) => (b.purchased_at = "2026-11-22T24:00:00Z"), "purchased_at", "RFC 3339"],
  ["currency missing", (b) => delete b.currency, "currency", "is missing"],
  ["currency lower case", (b) => (b.currency = "eur"), "currency", "ISO 4217"],
  ["currency four letters", (b) => (b.currency = "EURO"), "currency", "ISO 4217"],
  ["currency a symbol", (b) => (b.currency = "€"), "currency", "ISO 4217"],
  ["currency numeric", (b) => (b.currency = 978), "currency", "must be a string"],
  ["total missing", (b) => delete b.total, "total", "is missing"],
  ["total not an integer", (b) => (b.total = 248.5), "total", "must be an integer"],
  ["total a string", (b) => (b.total = "248"), "total", "must be an integer"],
  ["total beyond 2^53", (b) => (b.total = 2 ** 53), "total", "must be an integer of minor units from"],
  ["total not the sum of the lines", (b) => (b.total = 249), "total", "sum of line_items[].total, which is 248"],
  ["line_items missing", (b) => delete b.line_items, "line_items", "is missing"],
  ["line_items empty", (b) => (b.line_items = []), "line_items", "at least 1 item"],
  ["line_items an object", (b) => (b.line_items = {}), "line_items", "must be an array"],
  [
    "line_items 501 items",
    (b) => {
      b.line_items = Array.from({ length: 501 }, () => ({ description: "x", quantity: 1, unit_price: 1, total: 1 }));
      b.total = 501;
    },
    "line_items",
    "at most 500 items",
  ],
  ["line item not an object", (b) => (b.line_items[3] = "Loyalty discount"), "line_items[3]", "must be a JSON object"],
  ["description missing", (b) => delete b.line_items[3].description, "line_items[3].description", "is missing"],
  ["description empty", (b) => (b.line_items[3].description = ""), "line_items[3].description", "1–200 characters"],
  ["description 201 characters", (b) => (b.line_items[3].description = "d".repeat(201)), "line_items[3].description", "1–200 characters"],
  ["description 201 characters beyond the BMP", (b) => (b.line_items[3].description = "🧾".repeat(201)), "line_items[3].description", "1–200 characters"],
  ["description a number", (b) => (b.line_items[3].description = 7), "line_items[3].description", "must be a string"],
  ["quantity 0", (b) => (b.line_items[3].quantity = 0), "line_items[3].quantity", "must not be 0"],
  ["quantity missing", (b) => delete b.line_items[3].quantity, "line_items[3].quantity", "is missing"],
  ["quantity a string", (b) => (b.line_items[3].quantity = "1"), "line_items[3].quantity", "must be a number"],
  ["unit_price missing", (b) => delete b.line_items[1].unit_price, "line_items[1].unit_price", "is missing"],
  ["unit_price not an integer", (b) => (b.line_items[1].unit_price = 2.49), "line_items[1].unit_price", "must be an integer"],
  ["unit_price beyond 2^53", (b) => (b.line_items[1].unit_price = -(2 ** 53)), "line_items[1].unit_price", "must be an integer of minor units from"],
  ["line total missing", (b) => delete b.line_items[2].total, "line_items[2].total", "is missing"],
  ["line total not an integer", (b) => (b.line_items[2].total = -199.5), "line_items[2].total", "must be an integer"],
  ["sku a number", (b) => (b.line_items[0].sku = 4006381333931), "line_items[0].sku", "must be a string"],
  ["sku null", (b) => (b.line_items[0].sku = null), "line_items[0].sku", "not null; leave out"],
  ["vat_rate below 0", (b) => (b.line_items[0].vat_rate = -1), "line_items[0].vat_rate", "from 0 to 100"],
  ["vat_rate above 100", (b) => (b.line_items[0].vat_rate = 100.5), "line_items[0].vat_rate", "from 0 to 100"],
  ["vat_rate a string", (b) => (b.line_items[0].vat_rate = "7%"), "line_items[0].vat_rate", "must be a number"],
  ["store_id a number", (b) => (b.store_id = 42), "store_id", "must be a string"],
  ["pos_receipt_number a number", (b) => (b.pos_receipt_number = 123), "pos_receipt_number", "must be a string"],
  ["payments an object", (b) => (b.payments = { card: 248 }), "payments", "must be an array"],
  ["payment not an object", (b) => (b.payments = ["card"]), "payments[0]", "must be a JSON object"],
  ["payment without method", (b) => delete b.payments[0].method, "payments[0].method", "is missing"],
  ["payment method a number", (b) => (b.payments[0].method = 1), "payments[0].method", "must be a string"],
  ["payment amount not an integer", (b) => (b.payments[0].amount = 2.48), "payments[0].amount", "must be an integer"],
  ["payment without amount", (b) => delete b.payments[0].amount, "payments[0].amount", "is missing"],
  [
    "metadata with 21 keys",
    (b) => (b.metadata = Object.fromEntries(Array.from({ length: 21 }, (_, i) => [`k${i}`, "v"]))),
    "metadata",
    "at most 20 keys",
  ],
  ["metadata value of 201 characters", (b) => (b.metadata.loyalty_card = "4".repeat(201)), "metadata.loyalty_card", "at most 200 characters"],
  ["metadata value a number", (b) => (b.metadata.loyalty_card = 4711), "metadata.loyalty_card", "must be a string"],
  ["metadata key that is not a plain name", (b) => (b.metadata["till no"] = 7), 'metadata["till no"]', "must be a string"],
  ["metadata an array", (b) => (b.metadata = ["4711"]), "metadata", "must be a JSON object"],
  ["unknown top-level field", (b) => (b.totl = 248), "totl", "is not a field of this operation"],
];

describe("docs/api.md#add-body add body rules: 406 naming the field path", () => {
  it.each(BROKEN_RULES)("%s: 406 naming it and nothing stored", async (_label, mutate, path, reason) => {
    const { headers } = await newCaller();
    const body = validReceiptBody();
    mutate(body);
    const message = await expectRefused(() => postAdd(headers, body), 406, "Not Acceptable");
    expect(message).toContain(`Body field ${path} `);
    expect(message).toContain(reason);
    expect(message).toContain("invalid syntax");
  });

  it("names every unknown top-level field, so that no typo vanishes", async () => {
    const { headers } = await newCaller();
    const message = await expectRefused(
      () => postAdd(headers, { ...validReceiptBody(), Currency: "EUR", line_item: [] }),
      406,
      "Not Acceptable",
    );
    expect(message).toContain("Body field Currency is not a field");
    expect(message).toContain("Body field line_item is not a field");
  });

  it("names every broken field in one 406", async () => {
    const { headers } = await newCaller();
    const body = validReceiptBody();
    body.currency = "eur";
    body.line_items[3].quantity = 0;
    body.metadata.note = "n".repeat(201);
    const message = await expectRefused(() => postAdd(headers, body), 406, "Not Acceptable");
    for (const path of ["currency", "line_items[3].quantity", "metadata.note"]) expect(message).toContain(`Body field ${path} `);
  });

  it("names at most ten fields, then counts the rest", async () => {
    const { headers } = await newCaller();
    const body = validReceiptBody();
    body.line_items = Array.from({ length: 25 }, () => ({ description: "x", quantity: 0, unit_price: 1, total: 1 }));
    body.total = 25;
    const message = await expectRefused(() => postAdd(headers, body), 406, "Not Acceptable");
    expect(message.match(/Body field line_items\[\d+\]\.quantity must not be 0/g)).toHaveLength(10);
    expect(message).toContain("and 15 more fields");
  });

  it("comes before idempotency: a broken body under a used key is a 406, not a 409", async () => {
    const { headers } = await newCaller();
    const keyed = { ...headers, "Idempotency-Key": uniqueId("key") };
    expect((await postAdd(keyed)).status).toBe(200);
    await expectRefused(() => postAdd(keyed, { ...validReceiptBody(), currency: "eur" }), 406, "Not Acceptable");
  });
});

describe("docs/api.md#add-body add body rules: the edges that pass", () => {
  const accepted: [string, Mutation][] = [
    ["only the required fields", (b) => {
      for (const field of ["store_id", "pos_receipt_number", "payments", "metadata"]) delete b[field];
      for (const item of b.line_items) {
        delete item.sku;
        delete item.vat_rate;
      }
    }],
    ["purchased_at with fractions and a negative offset", (b) => (b.purchased_at = "2026-11-22T08:33:00.123456-05:30")],
    ["purchased_at in UTC, lower-case t and z as RFC 3339 allows", (b) => (b.purchased_at = "2026-11-22t13:03:00z")],
    ["purchased_at on a leap day and a leap second", (b) => (b.purchased_at = "2016-12-31T23:59:60Z")],
    ["a receipt of returns only, with a negative total", (b) => {
      b.line_items = [{ description: "Returned kettle", quantity: -1, unit_price: 2999, total: -2999 }];
      b.total = -2999;
    }],
    ["a weighed quantity", (b) => (b.line_items[1].quantity = 0.735)],
    ["vat_rate 0 and 100", (b) => {
      b.line_items[0].vat_rate = 0;
      b.line_items[1].vat_rate = 100;
    }],
    ["500 line items", (b) => {
      b.line_items = Array.from({ length: 500 }, () => ({ description: "x", quantity: 1, unit_price: 3, total: 3 }));
      b.total = 1500;
    }],
    ["a description of 200 characters, counted as characters, not UTF-16 units", (b) => (b.line_items[0].description = "🧾".repeat(200))],
    ["metadata of 20 keys with values of 200 characters", (b) => {
      b.metadata = Object.fromEntries(Array.from({ length: 20 }, (_, i) => [`k${i}`, "é".repeat(200)]));
    }],
    ["amounts near 2^53 whose exact sum is the total", (b) => {
      b.line_items = [
        { description: "a", quantity: 1, unit_price: 2 ** 53 - 1, total: 2 ** 53 - 1 },
        { description: "b", quantity: 1, unit_price: -(2 ** 53 - 2), total: -(2 ** 53 - 2) },
      ];
      b.total = 1;
    }],
  ];
  it.each(accepted)("%s: 200", async (_label, mutate) => {
    const { headers } = await newCaller();
    const body = validReceiptBody();
    mutate(body);
    const answer = await postAdd(headers, body);
    expect(answer.status, JSON.stringify(answer.body)).toBe(200);
  });
});
