/**
 * A token may claim no longer a life than login grants, the hour and the clock skew.
 * Only a holder of a signing key could mint a longer one; each is a 403 that changes nothing.
 */
import { describe, expect, it } from "vitest";
import { PATHS } from "../../../src/shared/paths.ts";
import { call, expectRefused, issueClient, newCaller, postAdd, signTestToken } from "../../support/api.ts";
import { deleteHeadersFor, receiptExists, seedReceipt } from "../../support/notices.ts";

const now = () => Math.floor(Date.now() / 1000);

describe("token lifetime: docs/api.md#login", () => {
  const lifetimes: [string, { iat: number; exp: number }, number][] = [
    ["exp a day after iat", { iat: now() - 60, exp: now() + 86_340 }, 403],
    ["exp 3631 s after iat, past the hour and the 30 s skew", { iat: now(), exp: now() + 3631 }, 403],
    ["exp 3630 s after iat, within the skew", { iat: now(), exp: now() + 3630 }, 200],
  ];

  it.each(lifetimes)("%s: add", async (_label, times, status) => {
    const { client, headers } = await newCaller();
    const token = await signTestToken({ sub: client.clientId, ...times });
    const send = () => postAdd({ ...headers, Authorization: `Bearer ${token}` });
    if (status === 200) {
      expect((await send()).status).toBe(200);
    } else {
      expect(await expectRefused(send, 403, "Forbidden")).toContain("Header Authorization does not hold a valid access token");
    }
  });

  it.each(lifetimes.filter(([, , status]) => status === 403))("%s: delete 403, the receipt kept", async (_label, times) => {
    const client = await issueClient();
    const receipt = await seedReceipt(client);
    const token = await signTestToken({ sub: client.clientId, ...times });
    await expectRefused(() => call(PATHS.delete, { headers: deleteHeadersFor(token, receipt) }), 403, "Forbidden");
    expect(await receiptExists(receipt.receipt_id)).toBe(true);
  });
});

