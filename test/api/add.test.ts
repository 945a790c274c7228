import { createExecutionContext, waitOnExecutionContext } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { createApp } from "../../src/api/app.ts";
import { runScheduledJobs } from "../../src/api/scheduled.ts";
import { addReceipt, IDEMPOTENCY_WINDOW_MS } from "../../src/storage/receipts.ts";
import {
  ADD,
  BASE,
  call,
  expectErrorShape,
  expectNamesMissing,
  UNUSABLE_VALUES,
  issueClient,
  nonEmptySubsets,
  expectRefused,
  loggedRequests,
  newCaller,
  postAdd,
  rowCounts,
  signTestToken,
  uniqueId,
  updateClient,
  validReceiptBody,
  type Answer,
} from "../helpers.ts";

const REQUIRED_HEADERS = ["Authorization", "client_id", "chain_id", "app_user_id", "Content-Type"] as const;
const MAX_BODY_BYTES = 64 * 1024;

async function storedReceipt(receiptId: string): Promise<Record<string, unknown> | null> {
  return env.DB.prepare("SELECT * FROM receipts WHERE receipt_id = ?").bind(receiptId).first();
}

async function receiptsOf(clientId: string): Promise<number> {
  const row = await env.DB.prepare("SELECT COUNT(*) AS n FROM receipts WHERE client_id = ?").bind(clientId).first<{ n: number }>();
  return row!.n;
}

describe("contract §3 add success", () => {
  it("answers 200 with receipt_id, chain_id, client_id, app_user_id, created_at and stores the receipt", async () => {
    const { client, headers } = await newCaller();
    const text = JSON.stringify(validReceiptBody());
    const before = Date.now();
    const answer = await postAdd(headers, text);
    expect(answer.status).toBe(200);
    expect(answer.headers.get("content-type")).toBe("application/json; charset=utf-8");
    expect(answer.headers.get("cache-control")).toBe("no-store");
    expect(answer.body).toEqual({
      data: {
        receipt_id: expect.any(String),
        chain_id: headers.chain_id,
        client_id: client.clientId,
        app_user_id: headers.app_user_id,
        created_at: expect.any(String),
      },
      status: "OK",
      status_code: 200,
    });
    const { receipt_id, created_at } = answer.body.data;
    expect(new Date(created_at).toISOString()).toBe(created_at);
    expect(Date.parse(created_at)).toBeGreaterThanOrEqual(before);
    expect(Date.parse(created_at)).toBeLessThanOrEqual(Date.now());
    expect(await storedReceipt(receipt_id)).toEqual({
      receipt_id,
      chain_id: headers.chain_id,
      client_id: client.clientId,
      app_user_id: headers.app_user_id,
      body: text,
      created_at,
    });
  });

  it("makes a UUIDv7 receipt_id whose time is the creation time, so IDs sort by time", async () => {
    const { headers } = await newCaller();
    const first = (await postAdd(headers)).body.data;
    await new Promise((resolve) => setTimeout(resolve, 5));
    const second = (await postAdd(headers)).body.data;
    for (const data of [first, second]) {
      expect(data.receipt_id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
      const millis = parseInt(data.receipt_id.replaceAll("-", "").slice(0, 12), 16);
      expect(millis).toBe(Date.parse(data.created_at));
    }
    expect(second.receipt_id > first.receipt_id).toBe(true);
  });

  it("stores the body as given, byte for byte, unknown fields inside lines and payments included", async () => {
    const { headers } = await newCaller();
    const body = validReceiptBody();
    body.line_items[0].deposit = 25;
    body.payments[0].card_last4 = "4242";
    const text = `\n  ${JSON.stringify(body, null, 3)}  \n`;
    const answer = await postAdd(headers, text);
    expect(answer.status).toBe(200);
    expect((await storedReceipt(answer.body.data.receipt_id))?.body).toBe(text);
  });

  it("reads header names case-insensitively and takes a charset parameter of utf-8", async () => {
    const { headers } = await newCaller();
    const lower = Object.fromEntries(Object.entries(headers).map(([name, value]) => [name.toLowerCase(), value]));
    expect((await postAdd({ ...lower, "content-type": "Application/JSON; charset=UTF-8" })).status).toBe(200);
    expect((await postAdd({ ...headers, "Content-Type": 'application/json;charset="utf-8"' })).status).toBe(200);
  });

  it("adds for any of the client's chains", async () => {
    const chains = [uniqueId("chain"), uniqueId("chain")];
    const { headers } = await newCaller({ chains });
    for (const chain_id of chains) {
      const answer = await postAdd({ ...headers, chain_id });
      expect(answer.status).toBe(200);
      expect(answer.body.data.chain_id).toBe(chain_id);
    }
  });

  it("without an Idempotency-Key every call adds a receipt", async () => {
    const { client, headers } = await newCaller();
    const [first, second] = [await postAdd(headers), await postAdd(headers)];
    expect(first.body.data.receipt_id).not.toBe(second.body.data.receipt_id);
    expect(await receiptsOf(client.clientId)).toBe(2);
  });
});

describe("contract §1 add header errors: 400 missing headers", () => {
  it.each(nonEmptySubsets(REQUIRED_HEADERS).map((names) => [names.join("+"), names] as const))(
    "without %s: 400 naming every missing header and nothing stored",
    async (_label, missing) => {
      const { headers } = await newCaller();
      for (const name of missing) delete headers[name];
      const message = await expectRefused(() => postAdd(headers), 400, "Bad Request");
      expectNamesMissing(message, missing, REQUIRED_HEADERS);
    },
  );

  it("comes before every other check: a missing header with a bad token and body is a 400", async () => {
    const { headers } = await newCaller();
    delete headers.app_user_id;
    const message = await expectRefused(
      () => postAdd({ ...headers, Authorization: "Bearer nonsense", "Content-Type": "text/plain" }, "{"),
      400,
      "Bad Request",
    );
    expect(message).toContain("app_user_id");
  });
});

describe("contract §1 add header errors: 406 a header value is not a string", () => {
  const cases = [...REQUIRED_HEADERS, "Idempotency-Key"].flatMap((name) =>
    UNUSABLE_VALUES
      .filter(([label]) => !(name === "Authorization" && label.startsWith("longer")))
      .map(([label, value]) => [name, label, value] as const),
  );
  // workerd hands the Worker an empty Authorization or Content-Type as no header at all.
  const droppedByRuntime = (name: string, value: string) =>
    (name === "Authorization" || name === "Content-Type") && value.trim() === "";

  it.each(cases.filter(([name, , value]) => !droppedByRuntime(name, value)))(
    "%s %s: 406 naming it and nothing stored",
    async (name, _label, value) => {
      const { headers } = await newCaller();
      const message = await expectRefused(() => postAdd({ ...headers, [name]: value }), 406, "Not Acceptable");
      expect(message).toContain(name);
      expect(message).toContain("invalid syntax");
    },
  );

  it.each(cases.filter(([name, , value]) => droppedByRuntime(name, value)))(
    "%s %s: arrives as missing (400); the app itself would answer 406",
    async (name, _label, value) => {
      const { headers } = await newCaller();
      const changed = { ...headers, [name]: value };
      expect(await expectRefused(() => postAdd(changed), 400, "Bad Request")).toContain(`${name} is missing`);
      const direct = async (): Promise<Answer> => {
        const request = new Request(BASE + ADD, { method: "POST", headers: changed, body: JSON.stringify(validReceiptBody()) });
        const response = await createApp().fetch(request, env, createExecutionContext());
        return { status: response.status, headers: response.headers, body: await response.json() };
      };
      expect(await expectRefused(direct, 406, "Not Acceptable")).toContain(name);
    },
  );

  it("names every unusable header in one 406", async () => {
    const { headers } = await newCaller();
    const message = await expectRefused(
      () => postAdd({ ...headers, chain_id: " ", app_user_id: "a\u0007b" }),
      406,
      "Not Acceptable",
    );
    expect(message).toContain("chain_id");
    expect(message).toContain("app_user_id");
  });

  it("Idempotency-Key: 256 characters are refused, 255 and 1 accepted", async () => {
    const { headers } = await newCaller();
    const message = await expectRefused(
      () => postAdd({ ...headers, "Idempotency-Key": "k".repeat(256) }),
      406,
      "Not Acceptable",
    );
    expect(message).toContain("Idempotency-Key");
    expect(message).toContain("255");
    expect((await postAdd({ ...headers, "Idempotency-Key": "k".repeat(255) })).status).toBe(200);
    expect((await postAdd({ ...headers, "Idempotency-Key": "k" })).status).toBe(200);
  });

  it("Authorization is exempt from the length rule: an over-long token is a 403", async () => {
    const { headers } = await newCaller();
    const message = await expectRefused(
      () => postAdd({ ...headers, Authorization: `Bearer ${"x".repeat(5000)}` }),
      403,
      "Forbidden",
    );
    expect(message).toContain("Authorization");
  });
});

describe("contract §3 add authorisation: 403", () => {
  const now = () => Math.floor(Date.now() / 1000);

  it("a value that is not Bearer and a token: 403 naming Authorization", async () => {
    const { headers } = await newCaller();
    for (const authorization of ["Basic dXNlcjpwYXNz", "Bearer", "eyJhbGciOiJIUzI1NiJ9.e30.sig", "Bearer not-a-jwt"]) {
      const message = await expectRefused(() => postAdd({ ...headers, Authorization: authorization }), 403, "Forbidden");
      expect(message).toContain("Authorization");
    }
  });

  it("an expired token: 403 saying to generate a fresh token", async () => {
    const { client, headers } = await newCaller();
    const token = await signTestToken({ sub: client.clientId, iat: now() - 7200, exp: now() - 3600 });
    const message = await expectRefused(() => postAdd({ ...headers, Authorization: `Bearer ${token}` }), 403, "Forbidden");
    expect(message).toContain("expired");
    expect(message).toContain("fresh token");
  });

  it("a token for another audience or without the POS scope: 403", async () => {
    const { client, headers } = await newCaller();
    for (const claims of [{ aud: "someone-else" }, { scope: "service.admin" }]) {
      const token = await signTestToken({ sub: client.clientId, ...claims });
      const message = await expectRefused(() => postAdd({ ...headers, Authorization: `Bearer ${token}` }), 403, "Forbidden");
      expect(message).toContain("Authorization");
    }
  });

  it("a token of another client: 403 naming client_id", async () => {
    const owner = await newCaller();
    const other = await newCaller();
    const message = await expectRefused(
      () => postAdd({ ...owner.headers, Authorization: other.headers.Authorization! }),
      403,
      "Forbidden",
    );
    expect(message).toContain("client_id");
    expect(message).toContain("not the client the access token was issued to");
  });

  it("an unknown client_id: 403 naming client_id as unknown", async () => {
    const { headers } = await newCaller();
    const stranger = uniqueId("nobody");
    const token = await signTestToken({ sub: stranger });
    const message = await expectRefused(
      () => postAdd({ ...headers, client_id: stranger, Authorization: `Bearer ${token}` }),
      403,
      "Forbidden",
    );
    expect(message).toContain("client_id is unknown");
  });

  it("a disabled client: its live token is refused with 403", async () => {
    const { client, headers } = await newCaller();
    await updateClient(client.clientId, { disabled: true });
    const message = await expectRefused(() => postAdd(headers), 403, "Forbidden");
    expect(message).toContain("disabled");
  });

  it("a chain that is not the client's: 403 naming chain_id", async () => {
    const { headers } = await newCaller();
    const foreign = await issueClient();
    const message = await expectRefused(() => postAdd({ ...headers, chain_id: foreign.chains[0]! }), 403, "Forbidden");
    expect(message).toContain("chain_id");
  });

  it("comes before the body: a refused caller learns nothing about its body, type or size", async () => {
    const { headers } = await newCaller();
    const refusedChain = { ...headers, chain_id: uniqueId("chain") };
    await expectRefused(() => postAdd({ ...refusedChain, "Content-Type": "text/plain" }, "x".repeat(70_000)), 403, "Forbidden");
    await expectRefused(() => postAdd(refusedChain, "{"), 403, "Forbidden");
  });
});

describe("contract §3 add content type: 415", () => {
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

describe("contract §3 add size limit: 413 above 64 KiB, checked before parsing", () => {
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
        () => call(ADD, { headers: { ...headers, ...extra }, body: stream(MAX_BODY_BYTES + 1) }),
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

describe("contract §3 add body: 406 for a body that is not one JSON object", () => {
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
    const message = await expectRefused(() => call(ADD, { headers, body: bytes }), 406, "Not Acceptable");
    expect(message).toContain("Body is not valid UTF-8");
  });
});

type Mutation = (body: Record<string, any>) => void;

/** One failing case per rule of the contract's table: [case, change, field path named, reason]. */
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

describe("contract §3 add body rules: 406 naming the field path", () => {
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

describe("contract §3 add body rules: the edges that pass", () => {
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

describe("contract §3 idempotency", () => {
  it("a repeated key gets the first response again and stores no second receipt", async () => {
    const { client, headers } = await newCaller();
    const keyed = { ...headers, "Idempotency-Key": uniqueId("key") };
    const first = await postAdd(keyed);
    expect(first.status).toBe(200);
    const before = await rowCounts();
    const again = await postAdd(keyed);
    expect(again.status).toBe(200);
    expect(again.body).toEqual(first.body);
    expect(await rowCounts()).toEqual(before);
    expect(await receiptsOf(client.clientId)).toBe(1);
  });

  it("a retry with a renewed token is still the same request", async () => {
    const { client, headers } = await newCaller();
    const keyed = { ...headers, "Idempotency-Key": uniqueId("key") };
    const first = await postAdd(keyed);
    const renewed = await signTestToken({ sub: client.clientId });
    const again = await postAdd({ ...keyed, Authorization: `Bearer ${renewed}` });
    expect(again.body).toEqual(first.body);
    expect(await receiptsOf(client.clientId)).toBe(1);
  });

  it("20 calls racing with one key: one receipt stored, all 20 answers equal", async () => {
    const { client, headers } = await newCaller();
    const keyed = { ...headers, "Idempotency-Key": uniqueId("key") };
    const answers = await Promise.all(Array.from({ length: 20 }, () => postAdd(keyed)));
    for (const answer of answers) {
      expect(answer.status).toBe(200);
      expect(answer.body).toEqual(answers[0]!.body);
    }
    expect(await receiptsOf(client.clientId)).toBe(1);
    expect((await storedReceipt(answers[0]!.body.data.receipt_id))?.receipt_id).toBe(answers[0]!.body.data.receipt_id);
  });

  it.each<[string, (headers: Record<string, string>, chains: string[]) => [Record<string, string>, unknown]]>([
    ["another body", (h) => [h, { ...validReceiptBody(), store_id: "store-0043" }]],
    ["the same body written differently", (h) => [h, JSON.stringify(validReceiptBody(), null, 2)]],
    ["another app_user_id", (h) => [{ ...h, app_user_id: uniqueId("au") }, validReceiptBody()]],
    ["another chain_id", (h, chains) => [{ ...h, chain_id: chains[1]! }, validReceiptBody()]],
  ])("the same key with %s: 409 naming Idempotency-Key and nothing stored", async (_label, change) => {
    const chains = [uniqueId("chain"), uniqueId("chain")];
    const { headers } = await newCaller({ chains });
    const keyed = { ...headers, "Idempotency-Key": uniqueId("key") };
    expect((await postAdd(keyed)).status).toBe(200);
    const [changedHeaders, changedBody] = change(keyed, chains);
    const message = await expectRefused(() => postAdd(changedHeaders, changedBody), 409, "Conflict");
    expect(message).toContain("Idempotency-Key");
  });

  it("keys are per client: another client's same key adds its own receipt", async () => {
    const key = uniqueId("key");
    const one = await newCaller();
    const two = await newCaller();
    const first = await postAdd({ ...one.headers, "Idempotency-Key": key });
    const second = await postAdd({ ...two.headers, "Idempotency-Key": key });
    expect(second.status).toBe(200);
    expect(second.body.data.receipt_id).not.toBe(first.body.data.receipt_id);
    expect(second.body.data.client_id).toBe(two.client.clientId);
  });

  it("a refused call does not use up its key", async () => {
    const { client, headers } = await newCaller();
    const keyed = { ...headers, "Idempotency-Key": uniqueId("key") };
    await expectRefused(() => postAdd(keyed, { ...validReceiptBody(), total: 1 }), 406, "Not Acceptable");
    const answer = await postAdd(keyed);
    expect(answer.status).toBe(200);
    expect(await receiptsOf(client.clientId)).toBe(1);
  });

  it("a key older than 24 hours counts as absent: a new request under it adds a receipt", async () => {
    const { client, headers } = await newCaller();
    const key = uniqueId("key");
    await rememberKey(client.clientId, key, Date.now() - IDEMPOTENCY_WINDOW_MS - 60_000);
    const answer = await postAdd({ ...headers, "Idempotency-Key": key });
    expect(answer.status).toBe(200);
    expect(answer.body.data.receipt_id).not.toMatch(/^old-/);
    const again = await postAdd({ ...headers, "Idempotency-Key": key });
    expect(again.body).toEqual(answer.body);
  });

  it("a key younger than 24 hours still guards its first request", async () => {
    const { client, headers } = await newCaller();
    const key = uniqueId("key");
    await rememberKey(client.clientId, key, Date.now() - IDEMPOTENCY_WINDOW_MS + 60_000);
    await expectRefused(() => postAdd({ ...headers, "Idempotency-Key": key }), 409, "Conflict");
  });
});

/** Stores a receipt under a key as if it had been added at `createdAt`, through the storage module. */
async function rememberKey(clientId: string, key: string, createdAt: number): Promise<void> {
  const data = {
    receipt_id: uniqueId("old"),
    chain_id: "chain-old",
    client_id: clientId,
    app_user_id: "au-old",
    created_at: new Date(createdAt).toISOString(),
  };
  const outcome = await addReceipt(env.DB, { ...data, body: "{}" }, {
    key,
    fingerprint: "an older request",
    response: { data, status: "OK", status_code: 200 },
  });
  expect(outcome).toEqual({ kind: "added" });
}

describe("contract §3 idempotency: expired keys are cleaned up by the cron job", () => {
  it("deletes every key older than 24 hours, past one chunk, and keeps the younger ones", async () => {
    const now = Date.now();
    const { clientId } = await issueClient();
    await rememberKey(clientId, "young", now - IDEMPOTENCY_WINDOW_MS + 60_000);
    // 2,500 expired keys at once: more than the job deletes in one statement.
    await env.DB.prepare(
      `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 2500)
       INSERT INTO idempotency_keys (client_id, idempotency_key, fingerprint, receipt_id, response, created_at)
       SELECT ?1, 'expired-' || i, 'f', 'r-' || i, '{}', ?2 FROM n`,
    )
      .bind(clientId, new Date(now - IDEMPOTENCY_WINDOW_MS - 1).toISOString())
      .run();
    const expiredBefore = await countKeysOlderThan(now - IDEMPOTENCY_WINDOW_MS);
    expect(expiredBefore).toBeGreaterThanOrEqual(2500);

    const lines = await loggedRequests(() => runScheduledJobs(env, new Date(now)));
    expect(lines.find((line) => line.job === "idempotency-keys.delete-expired")).toMatchObject({
      level: "info",
      event: "scheduled",
      deleted: expiredBefore,
    });
    expect(await countKeysOlderThan(now - IDEMPOTENCY_WINDOW_MS)).toBe(0);
    const young = await env.DB.prepare("SELECT COUNT(*) AS n FROM idempotency_keys WHERE client_id = ? AND idempotency_key = 'young'")
      .bind(clientId)
      .first<{ n: number }>();
    expect(young!.n).toBe(1);
  });
});

async function countKeysOlderThan(instant: number): Promise<number> {
  const row = await env.DB.prepare("SELECT COUNT(*) AS n FROM idempotency_keys WHERE created_at < ?")
    .bind(new Date(instant).toISOString())
    .first<{ n: number }>();
  return row!.n;
}

describe("contract §3 cost budget: one KV read and one D1 round trip per add", () => {
  /** The bindings, with every KV call and every D1 round trip recorded by name. */
  function countingEnv(): { env: Cloudflare.Env; calls: string[] } {
    const calls: string[] = [];
    const record = <T extends object>(target: T, label: string, wrap?: (name: string, result: unknown) => unknown) =>
      new Proxy(target, {
        get(object, name) {
          const value = Reflect.get(object, name, object);
          if (typeof value !== "function") return value;
          return (...args: unknown[]) => {
            if (typeof name === "string" && !["prepare", "bind"].includes(name)) calls.push(`${label}.${name}`);
            const result = value.apply(object, args);
            return wrap ? wrap(String(name), result) : result;
          };
        },
      });
    // A statement runs only through run/all/first/raw, or through batch; prepare and bind cost nothing.
    // D1's batch needs the real statement objects, so their methods are wrapped in place.
    const counted = (statement: D1PreparedStatement): D1PreparedStatement => {
      for (const method of ["run", "all", "first", "raw"] as const) {
        const original = statement[method].bind(statement) as (...args: unknown[]) => unknown;
        (statement as any)[method] = (...args: unknown[]) => {
          calls.push(`d1.${method}`);
          return original(...args);
        };
      }
      const bind = statement.bind.bind(statement);
      statement.bind = (...values: unknown[]) => counted(bind(...values));
      return statement;
    };
    const db = record(env.DB, "d1", (name, result) => (name === "prepare" ? counted(result as D1PreparedStatement) : result));
    return { env: { ...env, DB: db, CLIENTS: record(env.CLIENTS, "kv") }, calls };
  }

  async function measuredAdd(headers: Record<string, string>): Promise<{ status: number; calls: string[] }> {
    const counting = countingEnv();
    const ctx = createExecutionContext();
    const response = await createApp().fetch(
      new Request(BASE + ADD, { method: "POST", headers, body: new TextEncoder().encode(JSON.stringify(validReceiptBody())) }),
      counting.env,
      ctx,
    );
    await response.text();
    await waitOnExecutionContext(ctx);
    return { status: response.status, calls: counting.calls };
  }

  it("with an Idempotency-Key, first call and replay: one KV get and one D1 batch", async () => {
    const { headers } = await newCaller();
    const keyed = { ...headers, "Idempotency-Key": uniqueId("key") };
    expect(await measuredAdd(keyed)).toEqual({ status: 200, calls: ["kv.get", "d1.batch"] });
    expect(await measuredAdd(keyed)).toEqual({ status: 200, calls: ["kv.get", "d1.batch"] });
  });

  it("without an Idempotency-Key: one KV get and one D1 statement", async () => {
    const { headers } = await newCaller();
    expect(await measuredAdd(headers)).toEqual({ status: 200, calls: ["kv.get", "d1.run"] });
  });

  it("a refused body costs one KV get and no D1 call at all", async () => {
    const { headers } = await newCaller();
    const counting = countingEnv();
    const response = await createApp().fetch(
      new Request(BASE + ADD, { method: "POST", headers, body: new TextEncoder().encode("{}") }),
      counting.env,
      createExecutionContext(),
    );
    await response.text();
    expect(response.status).toBe(406);
    expect(counting.calls).toEqual(["kv.get"]);
  });
});

describe("contract §1 add common rules", () => {
  it.each(["GET", "PUT", "DELETE", "PATCH"])("%s: 405 with Allow: POST", async (method) => {
    const answer = await call(ADD, { method });
    expect(expectErrorShape(answer, 405, "Method Not Allowed")).toContain("POST");
    expect(answer.headers.get("allow")).toBe("POST");
  });
});
