/**
 * A receipt body means one thing to every reader. Every metadata rule holds
 * for a key named `__proto__`, the body is I-JSON (RFC 7493), and a compressed body is refused
 * before it is read (docs/api.md#add-body, docs/api.md#add-errors).
 */
import { describe, expect, it } from "vitest";
import { PATHS } from "../../src/shared/paths.ts";
import {
  call,
  expectErrorShape,
  expectRefused,
  expectRemark,
  loggedRequests,
  newCaller,
  postAdd,
  rowCounts,
  validReceiptBody,
  type Answer,
} from "../support/api.ts";
import { storedReceipt } from "../support/shards.ts";

const VALID = JSON.stringify(validReceiptBody());

/** The valid body's text with `member` (raw JSON text) put first inside the object that `opening` opens. */
function withMember(opening: string, member: string): string {
  if (!VALID.includes(opening)) throw new Error(`no ${opening} in the valid body`);
  return VALID.replace(opening, `${opening}${member},`);
}

async function storedBody(answer: Answer): Promise<unknown> {
  return (await storedReceipt(answer.body.data.receipt_id))?.body;
}

async function expectStoredAsSent(text: string): Promise<void> {
  const { headers } = await newCaller();
  const answer = await postAdd(headers, text);
  expect(answer.status, JSON.stringify(answer.body)).toBe(200);
  expect(await storedBody(answer)).toBe(text);
}

async function expectNotAcceptable(text: string | Uint8Array): Promise<string> {
  const { headers } = await newCaller();
  const message = await expectRefused(
    () => (typeof text === "string" ? postAdd(headers, text) : call(PATHS.add, { headers, body: text })),
    406,
    "Not Acceptable",
  );
  expectRemark(message);
  return message;
}

describe("every metadata rule holds for every key, __proto__ included: docs/api.md#add-body", () => {
  it.each([
    ["an array", '["4711"]', "must be a string"],
    ["a number", "4711", "must be a string"],
    ["an object", '{"card":"4711"}', "must be a string"],
    ["null", "null", "must be a string, not null"],
    ["5,000 characters", JSON.stringify("x".repeat(5000)), "must be at most 200 characters"],
  ])("metadata.__proto__ holding %s: 406 naming it, nothing stored", async (_label, value, reason) => {
    const message = await expectNotAcceptable(withMember('"metadata":{', `"__proto__":${value}`));
    expect(message).toContain(`Body field metadata.__proto__ ${reason}`);
  });

  it("__proto__ as a 21st metadata key: 406, at most 20 keys", async () => {
    const twenty = Array.from({ length: 20 }, (_, index) => `"k${index}":"v"`).join(",");
    const text = VALID.replace(/"metadata":\{[^}]*\}/, `"metadata":{${twenty},"__proto__":"v"}`);
    const message = await expectNotAcceptable(text);
    expect(message).toContain("Body field metadata must hold at most 20 keys");
  });

  it("__proto__ spelled with an escape is the same key: 406 naming metadata.__proto__", async () => {
    const message = await expectNotAcceptable(withMember('"metadata":{', '"\\u005f_proto__":5'));
    expect(message).toContain("Body field metadata.__proto__ must be a string");
  });

  it("a metadata key __proto__ that keeps every rule is stored as sent", async () => {
    await expectStoredAsSent(withMember('"metadata":{', '"__proto__":"4711"'));
  });

  it("a top-level __proto__ is an unknown field: 406 naming it, nothing stored", async () => {
    const message = await expectNotAcceptable(withMember("{", '"__proto__":{"total":1}'));
    expect(message).toContain("Body field __proto__ is not a field of this operation");
  });

  it("a __proto__ in a line item or payment supplies none of its fields: 406 naming the missing ones", async () => {
    const item = '{"__proto__":{"description":"Oat milk","quantity":1,"unit_price":248,"total":248}}';
    const payment = '{"__proto__":{"method":"card","amount":248}}';
    const text = VALID.replace(/"line_items":\[.*?\],"store_id"/, `"line_items":[${item}],"store_id"`).replace(
      /"payments":\[.*?\]/,
      `"payments":[${payment}]`,
    );
    const message = await expectNotAcceptable(text);
    for (const field of ["line_items[0].description", "line_items[0].quantity", "payments[0].method", "payments[0].amount"]) {
      expect(message).toContain(`Body field ${field} is missing`);
    }
  });

  it("a __proto__ in a line item or payment beside its fields is a till's own field, stored as sent", async () => {
    await expectStoredAsSent(withMember('"payments":[{', '"__proto__":{"x":1}').replace('"line_items":[{', '"line_items":[{"__proto__":[1],'));
  });

  it("the log names no client's key: metadata.__proto__ is written [*]", async () => {
    const { headers } = await newCaller();
    const lines = await loggedRequests(() => postAdd(headers, withMember('"metadata":{', '"__proto__":5')));
    expect(lines.find((line) => line.event === "request")?.cause).toBe("body rules: metadata[*] invalid_type");
  });
});

describe("the body must be I-JSON (RFC 7493): docs/api.md#add-body", () => {
  it.each([
    ["a top-level field", VALID.replace('"total":248', '"total":999,"total":248'), "total"],
    ["the same name spelled with an escape", VALID.replace('"total":248', '"total":999,"\\u0074otal":248'), "total"],
    ["a field of a line item", VALID.replace('"sku":"4006381333931"', '"sku":"1","sku":"4006381333931"'), "line_items[0].sku"],
    ["a metadata key", withMember('"metadata":{', '"loyalty_card":"1"'), "metadata.loyalty_card"],
    ["a till's own field deep in a line item", withMember('"line_items":[{', '"x":[{"a":1},{"b":[{"c":1,"c":2}]}]'), "line_items[0].x[1].b[0].c"],
    ["__proto__", withMember('"metadata":{', '"__proto__":"1","__proto__":"2"'), "metadata.__proto__"],
  ])("a member name repeated in %s: 406 naming its path, nothing stored", async (_label, text, path) => {
    const message = await expectNotAcceptable(text);
    expect(message).toContain(`Body field ${path} appears more than once in one object`);
  });

  const description = (escaped: string) => VALID.replace('"Oat milk 1 l"', `"Oat milk ${escaped}"`);
  it.each([
    ["a high surrogate alone", description("\\ud800")],
    ["a high surrogate at the end", description("\\ud83d")],
    ["a low surrogate alone", description("\\ude00")],
    ["a pair in the wrong order", description("\\ude00\\ud83d")],
    ["a high surrogate before a letter", description("\\ud83dx")],
    ["two high surrogates", description("\\ud83d\\ud83d\\ude00")],
  ])("%s in a string: 406 naming the field, nothing stored", async (_label, text) => {
    const message = await expectNotAcceptable(text);
    expect(message).toContain("Body field line_items[0].description holds a lone surrogate");
  });

  it("a lone surrogate in a member name: 406 naming the member", async () => {
    const message = await expectNotAcceptable(withMember('"metadata":{', '"card\\udbff":"1"'));
    expect(message).toContain('Body field metadata["card\\udbff"] has a lone surrogate in its name');
  });

  it("a lone surrogate sent raw is not UTF-8: 406, nothing stored", async () => {
    const [before, after] = VALID.split("Oat milk");
    const encode = (text: string) => new TextEncoder().encode(text);
    // U+D800 written as UTF-8 would write it, which UTF-8 forbids.
    const bytes = new Uint8Array([...encode(`${before}Oat `), 0xed, 0xa0, 0x80, ...encode(`milk${after}`)]);
    const message = await expectNotAcceptable(bytes);
    expect(message).toContain("Body is not valid UTF-8");
  });

  it.each([
    ["a field's value", VALID.replace('"store-0042"', '"store\\u0000-0042"'), "Body field store_id holds a NUL character"],
    ["a metadata key", withMember('"metadata":{', '"card\\u0000":"1"'), 'Body field metadata["card\\u0000"] has a NUL character in its name'],
    ["a till's own field", withMember('"line_items":[{', '"x":["ok","\\u0000"]'), "Body field line_items[0].x[1] holds a NUL character"],
  ])("NUL in %s: 406 naming it, nothing stored", async (_label, text, expected) => {
    expect(await expectNotAcceptable(text)).toContain(expected);
  });

  it.each([
    ["escaped", "\\uffff"],
    ["raw", "\ufdd0"],
    ["beyond the BMP", "\\udbff\\udfff"],
    ["beyond the BMP, raw", "\u{1fffe}"],
    ["raw, after plain text", "plain \uffff"],
  ])("a noncharacter, %s: 406 naming the field", async (_label, character) => {
    expect(await expectNotAcceptable(description(character))).toContain(
      "Body field line_items[0].description holds a Unicode noncharacter",
    );
  });

  it("what I-JSON allows is stored as sent: pairs escaped and raw, other escapes, one name in many objects", async () => {
    await expectStoredAsSent(description('\\ud83d\\ude00 😀 \\u00e9 \\"\\\\\\/\\b\\f\\n\\r\\t \\u001f \\ufffd'));
  });

  it("the first fault found is named, and a deep path is cut short", async () => {
    // 58 levels of long names inside the line item's 3, within the bound of 64.
    const depth = 58;
    const deep = `${'{"level":'.repeat(depth)}{"a":1,"a":2}${"}".repeat(depth)}`;
    const text = withMember('"line_items":[{', `"x":${deep}`).replace('"metadata":{', '"metadata":{"loyalty_card":"1",');
    const message = await expectNotAcceptable(text);
    expect(message).toContain("Body field line_items[0].x.level.level");
    expect(message).toContain("…");
    expect(message).not.toContain("metadata");
    expect(message.length).toBeLessThan(600);
  });

  it("the log names the rule and the schema's own names only", async () => {
    const { headers } = await newCaller();
    const lines = await loggedRequests(() => postAdd(headers, withMember('"metadata":{', '"loyalty_card":"1"')));
    expect(lines.find((line) => line.event === "request")?.cause).toBe("not I-JSON: metadata[*] duplicate name");
  });
});

describe("Content-Encoding other than identity: 415 before the body is read: docs/api.md#add-errors", () => {
  async function gzip(text: string): Promise<Uint8Array> {
    const stream = new Blob([text]).stream().pipeThrough(new CompressionStream("gzip"));
    return new Uint8Array(await new Response(stream).arrayBuffer());
  }

  it("a gzipped body labelled gzip: 415 naming Content-Encoding, nothing stored", async () => {
    const { headers } = await newCaller();
    const body = await gzip(VALID);
    const message = await expectRefused(
      () => call(PATHS.add, { headers: { ...headers, "Content-Encoding": "gzip" }, body }),
      415,
      "Unsupported Media Type",
    );
    expect(message).toContain("Header Content-Encoding must be identity");
    expectRemark(message);
  });

  it.each(["br", "GZIP", "gzip, identity", "identity, gzip", "identity,deflate", "x-custom"])(
    "plain JSON labelled %j: 415, nothing stored",
    async (coding) => {
      const { headers } = await newCaller();
      const message = await expectRefused(
        () => postAdd({ ...headers, "Content-Encoding": coding }),
        415,
        "Unsupported Media Type",
      );
      expect(message).toContain("Content-Encoding");
    },
  );

  it.each(["identity", "IDENTITY", " Identity ", "identity, identity"])("plain JSON labelled %j is stored", async (coding) => {
    const { headers } = await newCaller();
    expect((await postAdd({ ...headers, "Content-Encoding": coding })).status).toBe(200);
  });

  it("is answered before the body is read: a body that never arrives does not hold it", async () => {
    const { headers } = await newCaller();
    const never = new ReadableStream<Uint8Array>({ pull: () => new Promise<void>(() => undefined) });
    const answer = await call(PATHS.add, { headers: { ...headers, "Content-Encoding": "gzip" }, body: never });
    expectErrorShape(answer, 415, "Unsupported Media Type");
  });

  it("comes after the token and the chain, as every body check does", async () => {
    const { headers } = await newCaller();
    const answer = await postAdd({ ...headers, chain_id: "another-chain", "Content-Encoding": "gzip" });
    expectErrorShape(answer, 403, "Forbidden");
  });
});

describe("no full card number stored from any string of the body: docs/api.md#card-numbers", () => {
  it.each([
    ["a metadata value", "4111 1111 1111 1111", "4111 11** **** 1111", (b: Record<string, any>, text: string) => (b.metadata.card = text), "/metadata/card"],
    ["a line's description", "5555-5555-5555-4444", "5555-55**-****-4444", (b: Record<string, any>, text: string) => (b.line_items[1].description = `Rye bread, card ${text}`), "/line_items/1/description"],
    ["a line item's own field", "４１１１１１１１１１１１１１１１", "４１１１１１******１１１１", (b: Record<string, any>, text: string) => (b.line_items[0].x_card = text), "/line_items/0/x_card"],
    ["a payment's own field", "378282246310005", "378282*****0005", (b: Record<string, any>, text: string) => (b.payments[0].pan = text), "/payments/0/pan"],
    ["pos_receipt_number", "4111.1111.1111.1111", "4111.11**.****.1111", (b: Record<string, any>, text: string) => (b.pos_receipt_number = text), "/pos_receipt_number"],
  ])("in %s: stored masked, first six and last four kept, every other byte as sent; the answer names the field; the number never stored, answered or logged", async (_label, pan, masked, put, pointer) => {
    const sent = validReceiptBody();
    put(sent, pan);
    const kept = validReceiptBody();
    put(kept, masked);
    const { headers } = await newCaller();
    let answer: Answer | undefined;
    const logs = await loggedRequests(async () => {
      answer = await postAdd(headers, JSON.stringify(sent));
    });
    expect(answer!.status, JSON.stringify(answer!.body)).toBe(200);
    expect(answer!.body.data.masked_fields).toEqual([pointer]);
    const stored = await storedReceipt(answer!.body.data.receipt_id);
    expect(stored!.body).toBe(JSON.stringify(kept));
    for (const text of [JSON.stringify(answer!.body), JSON.stringify(logs), JSON.stringify(stored)]) expect(text).not.toContain(pan);
  });

  it("every string that holds one is masked and named, in the order of the body; a keyed retry gets the same answer and stores nothing more", async () => {
    const sent = validReceiptBody();
    sent.line_items[0].description = "Oat milk \u00b7 4111 1111 1111 1111 \u00b7 5555 5555 5555 4444";
    sent.metadata.note = "4111111111111111";
    // Escapes in a string are written as JSON.stringify writes them only where the string is masked.
    const text = JSON.stringify(sent).replace('"store_id"', '"store\\u005fid"').replace("\u00b7", "\\u00b7");
    const { headers } = await newCaller();
    const keyed = { ...headers, "Idempotency-Key": `mask-${crypto.randomUUID()}` };
    const answer = await postAdd(keyed, text);
    expect(answer.status, JSON.stringify(answer.body)).toBe(200);
    expect(answer.body.data.masked_fields).toEqual(["/line_items/0/description", "/metadata/note"]);
    const stored = (await storedReceipt(answer.body.data.receipt_id))!.body as string;
    expect(stored).toContain('"store\\u005fid"');
    expect(JSON.parse(stored).line_items[0].description).toBe("Oat milk \u00b7 4111 11** **** 1111 \u00b7 5555 55** **** 4444");
    expect(JSON.parse(stored).metadata.note).toBe("411111******1111");
    const before = await rowCounts();
    const again = await postAdd(keyed, text);
    expect(again.body).toEqual(answer.body);
    expect(await rowCounts()).toEqual(before);
  });

  it("in a metadata key's name: 406 naming metadata, the number never repeated; a name is refused, never masked", async () => {
    const body = validReceiptBody();
    body.metadata["4111111111111111"] = "card";
    const { headers } = await newCaller();
    const message = await expectRefused(() => postAdd(headers, body), 406, "Not Acceptable");
    expect(message).toContain("Body field metadata has a member whose name holds a full card number");
    expect(message).not.toContain("4111111111111111");
  });

  it("a GTIN sku that passes the Luhn check, a 16-digit loyalty number led by 1 and a phone number are stored", async () => {
    const body = validReceiptBody();
    body.line_items[0].sku = "4006381333924";
    body.metadata = { loyalty_card: "1111222233334444", phone: "+49 1512 3456704", order: "2026112200427000108" };
    await expectStoredAsSent(JSON.stringify(body));
  });
});
