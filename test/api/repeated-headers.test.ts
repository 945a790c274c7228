/**
 * docs/api.md#common-rules: an identifying header sent more than once, or holding a comma, is
 * refused on every route that reads it. The runtime hands a Worker repeated values joined with
 * ", ", so without the rule `app_user_id: user-42` twice with `user-43` would store a receipt
 * for a shopper named "user-42, user-43".
 */
import { describe, expect, it } from "vitest";
import { PATHS } from "../../src/shared/paths.ts";
import { call, expectRefused, issueClient, loginHeadersFor, loginToken, newCaller, uniqueId, validReceiptBody } from "../support/api.ts";
import { deleteHeadersFor, receiptExists, seedReceipt } from "../support/notices.ts";

const REPEATED = "was sent more than once or holds a comma";

/** The headers with `name` sent twice, once as `name` and once as `second`, as a client's stack would send them. */
function withRepeated(headers: Record<string, string>, name: string, second: string): Headers {
  const sent = new Headers(headers);
  sent.append(name, second);
  return sent;
}

describe("docs/api.md#common-rules identifying headers sent more than once: 406", () => {
  it("the runtime delivers a repeated header as one value joined with a comma", () => {
    expect(withRepeated({ app_user_id: "user-42" }, "app_user_id", "user-43").get("app_user_id")).toBe("user-42, user-43");
  });

  it("login: client_id twice is 406 naming it, and no token is issued", async () => {
    const client = await issueClient();
    const headers = withRepeated(loginHeadersFor(client), "client_id", client.clientId);
    const message = await expectRefused(() => call(PATHS.login, { headers }), 406, "Not Acceptable");
    expect(message).toContain(`client_id ${REPEATED}`);
  });

  it.each(["client_id", "chain_id", "app_user_id", "Idempotency-Key"])(
    "add: %s twice is 406 naming it, and nothing is stored",
    async (name) => {
      const { headers } = await newCaller();
      const first: Record<string, string> = { ...headers, "Idempotency-Key": uniqueId("key") };
      const sent = withRepeated(first, name, name === "app_user_id" ? uniqueId("au") : first[name]!);
      const body = new TextEncoder().encode(JSON.stringify(validReceiptBody()));
      const message = await expectRefused(() => call(PATHS.add, { headers: sent, body }), 406, "Not Acceptable");
      expect(message).toContain(`${name} ${REPEATED}`);
      expect(message).toContain("invalid syntax");
    },
  );

  it.each(["receipt_id", "client_id", "chain_id", "app_user_id"])(
    "delete: %s twice is 406 naming it, and the receipt stays",
    async (name) => {
      const client = await issueClient();
      const token = await loginToken(client);
      const receipt = await seedReceipt(client);
      const first = deleteHeadersFor(token, receipt);
      const headers = withRepeated(first, name, first[name]!);
      const message = await expectRefused(() => call(PATHS.delete, { headers }), 406, "Not Acceptable");
      expect(message).toContain(`${name} ${REPEATED}`);
      expect(await receiptExists(receipt.receipt_id)).toBe(true);
    },
  );
});

describe("docs/api.md#common-rules identifying headers holding a comma: 406", () => {
  it("add: an app_user_id that holds a comma is refused like a repeated one, and nothing is stored", async () => {
    const { headers } = await newCaller();
    const body = new TextEncoder().encode(JSON.stringify(validReceiptBody()));
    const message = await expectRefused(
      () => call(PATHS.add, { headers: { ...headers, app_user_id: "user-42,user-43" }, body }),
      406,
      "Not Acceptable",
    );
    expect(message).toContain(`app_user_id ${REPEATED}`);
  });
});
