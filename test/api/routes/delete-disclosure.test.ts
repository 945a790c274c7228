/**
 * A client holding another client's receipt_id must not be able to confirm guesses of
 * that receipt's chain and app user from which fields the 406 names.
 */
import { describe, expect, it } from "vitest";
import { call, expectErrorShape, expectRemark, issueClient, loginToken, uniqueId } from "../../support/api.ts";
import { outboxRows, receiptExists, seedReceipt } from "../../support/notices.ts";
import { PATHS } from "../../../src/shared/paths.ts";

describe("delete confirms no guess about another client's receipt: docs/api.md#delete-errors", () => {
  it("another client's receipt: the 406 names client_id alone, whatever the chain and app user guessed", async () => {
    const victim = await issueClient({ chains: [uniqueId("chain-v")] });
    const receipt = await seedReceipt(victim);
    const intruder = await issueClient();
    const token = await loginToken(intruder);
    const guesses = [
      ["both guessed right", receipt.chain_id, receipt.app_user_id],
      ["chain guessed right", receipt.chain_id, uniqueId("au-guess")],
      ["app user guessed right", uniqueId("chain-guess"), receipt.app_user_id],
      ["both guessed wrong", uniqueId("chain-guess"), uniqueId("au-guess")],
    ] as const;
    const messages = new Set<string>();
    for (const [label, chain_id, app_user_id] of guesses) {
      const headers = {
        Authorization: `Bearer ${token}`,
        receipt_id: receipt.receipt_id,
        client_id: intruder.clientId,
        chain_id,
        app_user_id,
      };
      const message = expectErrorShape(await call(PATHS.delete, { headers }), 406, "Not Acceptable");
      expect(message, label).toMatch(/^Header client_id does not match the receipt's client_id\./);
      expect(message, label).not.toMatch(/chain_id|app_user_id/);
      expectRemark(message);
      messages.add(message);
    }
    // One answer for every guess: nothing tells a right guess from a wrong one.
    expect(messages.size).toBe(1);
    expect(await receiptExists(receipt.receipt_id)).toBe(true);
    expect(await outboxRows(receipt.receipt_id)).toEqual([]);
  });
});
