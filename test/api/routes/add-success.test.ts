/** add: what a stored receipt holds and answers, and the common rules of the route. */
import { describe, expect, it } from "vitest";
import { call, expectErrorShape, newCaller, postAdd, uniqueId, validReceiptBody } from "../../support/api.ts";
import { PATHS } from "../../../src/shared/paths.ts";
import { storedReceipt, receiptsOf } from "../../support/shards.ts";

describe("docs/api.md#add add success", () => {
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
      format: null,
      mapped: null,
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

describe("docs/api.md#common-rules add common rules", () => {
  it.each(["GET", "PUT", "DELETE", "PATCH"])("%s: 405 with Allow: POST", async (method) => {
    const answer = await call(PATHS.add, { method });
    expect(expectErrorShape(answer, 405, "Method Not Allowed")).toContain("POST");
    expect(answer.headers.get("allow")).toBe("POST");
  });
});
