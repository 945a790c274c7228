/**
 * Fuzzing of add: random header sets, values and bodies. Beyond the documented shape, a
 * model of the store: a 200 only for a client's own token and one of its chains, an
 * Idempotency-Key replaying its first answer, and D1 holding exactly the receipts the 200s
 * reported, byte for byte.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { call, issueClient, loginToken, rowCounts, type TestClient } from "../support/api.ts";
import { IDENTIFYING_HEADERS, asReceived, headerSet, headerValue, receiptBody, times } from "./arbitraries.ts";
import { CAMPAIGN_TIMEOUT_MS, runCampaign, type FuzzRequest } from "./harness.ts";
import { PATHS } from "../../src/shared/paths.ts";
import { maskCardNumbersInJson } from "../../src/shared/card-numbers.ts";
import { STORED_COLUMNS, storedTexts, type StoredColumns } from "../../src/storage/stored-body.ts";
import { rowsOnEveryShard } from "../support/shards.ts";

/** A receipt as the model expects it in D1. */
interface Expected {
  chain_id: string;
  client_id: string;
  app_user_id: string;
  body: string;
}

describe("fuzzing: add", () => {
  it(
    "no 5xx, the error shape, a 200 only for the caller's own chain, and D1 holding exactly what the 200s reported",
    async () => {
      const clients = [await issueClient({ chains: ["fz-chain-a1", "fz-chain-a2"] }), await issueClient({ chains: ["fz-chain-b"] })];
      const tokens = await Promise.all(clients.map((client) => loginToken(client)));
      const baseline = await rowCounts();
      const stored = new Map<string, Expected>();
      const keys = new Map<string, string>();

      const requests: fc.Arbitrary<FuzzRequest> = fc
        .tuple(
          headerSet({
            // The first client's values repeat, so that a fair share of requests is its own add.
            Authorization: headerValue([...times(`Bearer ${tokens[0]}`, 8), `Bearer ${tokens[1]}`, "Bearer x.y.z"]),
            client_id: headerValue([...times(clients[0]!.clientId, 8), clients[1]!.clientId]),
            chain_id: headerValue([...times("fz-chain-a1", 4), ...times("fz-chain-a2", 3), "fz-chain-b", "fz-chain-c"]),
            app_user_id: headerValue(["au-1", "au-2", "' OR '1'='1"]),
            "Content-Type": headerValue(["application/json", "application/json", "application/json; charset=utf-8", "text/plain"]),
          }),
          fc.option(headerValue(["k1", "k2", "k3"]), { nil: undefined, freq: 3 }),
          receiptBody,
        )
        .map(([headers, key, body]) => ({ headers: key === undefined ? headers : { ...headers, "Idempotency-Key": key }, body }));

      await runCampaign(
        "add",
        requests,
        ({ headers, body }) => call(PATHS.add, { headers, body }),
        async ({ headers, body }, { answer }) => {
          if (answer.status === 200) {
            const data = answer.body.data;
            const received = (name: string) => asReceived(headers, name);
            const joined = IDENTIFYING_HEADERS.find((name) => received(name)?.includes(","));
            if (joined) throw new Error(`200 for ${joined} sent twice or holding a comma`);
            const caller = clients.find((client) => client.clientId === received("client_id"));
            const token = /^Bearer +(\S+)$/i.exec(received("authorization") ?? "")?.[1];
            if (!caller || token !== tokens[clients.indexOf(caller)]) throw new Error("200 without the client's own token");
            if (!caller.chains.includes(received("chain_id")!)) throw new Error("200 for a chain not the client's");
            const key = received("idempotency-key");
            const first = key === null ? undefined : keys.get(`${caller.clientId}:${key}`);
            if (first !== undefined) {
              if (data.receipt_id !== first) throw new Error(`key ${key} answered ${data.receipt_id}, first ${first}`);
            } else {
              if (stored.has(data.receipt_id)) throw new Error(`receipt_id ${data.receipt_id} given twice`);
              expect(data).toMatchObject({ client_id: caller.clientId, chain_id: received("chain_id"), app_user_id: received("app_user_id") });
              stored.set(data.receipt_id, { chain_id: data.chain_id, client_id: data.client_id, app_user_id: data.app_user_id, body: bodyText(body) });
              if (key !== null) keys.set(`${caller.clientId}:${key}`, data.receipt_id);
            }
          }
          const counts = await rowCounts();
          expect(counts.receipts).toBe(baseline.receipts! + stored.size);
          expect(counts.idempotency_keys).toBe(baseline.idempotency_keys! + keys.size);
        },
        () => [...clients.map((client: TestClient) => client.secret), ...tokens],
      );

      const rows = await rowsOnEveryShard<Omit<Expected, "body"> & { receipt_id: string } & StoredColumns>(
        `SELECT receipt_id, chain_id, client_id, app_user_id, ${STORED_COLUMNS.join(", ")} FROM receipts WHERE client_id IN (?, ?)`,
        clients[0]!.clientId,
        clients[1]!.clientId,
      );
      // The body as the till sent it, inflated where add deflated it (src/storage/stored-body.ts).
      const results = await Promise.all(
        rows.map(async ({ receipt_id, chain_id, client_id, app_user_id, ...texts }) => ({ receipt_id, chain_id, client_id, app_user_id, body: (await storedTexts(texts)).body })),
      );
      expect(Object.fromEntries(results.map(({ receipt_id, ...row }) => [receipt_id, row]))).toEqual(Object.fromEntries(stored));
    },
    CAMPAIGN_TIMEOUT_MS,
  );
});

// The text add stores: the body as sent, decoded as UTF-8 (a byte order mark is dropped), a full
// card number in free text masked (docs/api.md#card-numbers).
function bodyText(body: string | Uint8Array | undefined): string {
  return maskCardNumbersInJson(new TextDecoder().decode(typeof body === "string" ? new TextEncoder().encode(body) : body));
}
