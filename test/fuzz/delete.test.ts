/**
 * Fuzzing of delete: random header sets and values around a pool of stored receipts. A
 * model of docs/api.md#delete names the one status each request must get, so a receipt is deleted
 * exactly when its own client, with its own token, names its chain and app user; D1 loses exactly
 * those receipts and records exactly one notice for each.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { call, issueClient, loginToken, rowCounts, uniqueId, type TestClient } from "../support/api.ts";
import { seedReceipt, type SeededReceipt } from "../support/notices.ts";
import { asReceived, headerSet, headerValue, strayBody, times, usableHeader } from "./arbitraries.ts";
import { CAMPAIGN_TIMEOUT_MS, FUZZ_RUNS, FUZZ_SECONDS, runCampaign, type FuzzRequest } from "./harness.ts";
import { PATHS } from "../../src/shared/paths.ts";

// Enough receipts that the campaign never runs out: about one request in thirteen deletes one.
// No more than FUZZ_SECONDS can use (at a generous 200 requests a second): seeding is not bounded,
// and seeding more than the campaign can delete would only slow the smoke run of `npm test`.
const POOL = Math.ceil(Math.min(FUZZ_RUNS, FUZZ_SECONDS * 200) / 5);
const OWNER_FIELDS = ["client_id", "chain_id", "app_user_id"] as const;

describe("fuzzing: delete", () => {
  it(
    "no 5xx, the error shape, the model's status, and D1 losing exactly the receipts deleted, each with one notice",
    async () => {
      const clients = [await issueClient({ chains: ["fz-d-a1", "fz-d-a2"] }), await issueClient({ chains: ["fz-d-b"] })];
      const tokens = await Promise.all(clients.map((client) => loginToken(client)));
      const pool = await Promise.all(
        Array.from({ length: POOL }, (_, i) => {
          const client = clients[i % 3 === 2 ? 1 : 0]!;
          return seedReceipt(client, { chain_id: client.chains[i % client.chains.length]!, app_user_id: `au-${i % 4}` });
        }),
      );
      const deleted = new Set<string>();
      const baseline = await rowCounts();

      // A receipt of the pool, and headers that mostly name it as its owner would.
      const requests: fc.Arbitrary<FuzzRequest> = fc.integer({ min: 0, max: POOL - 1 }).chain((index) => {
        const receipt = pool[index]!;
        const own = clients.findIndex((client) => client.clientId === receipt.client_id);
        return fc
          .tuple(
            headerSet({
              Authorization: headerValue([...times(`Bearer ${tokens[own]}`, 8), `Bearer ${tokens[1 - own]}`, "Bearer x.y.z"]),
              receipt_id: headerValue([...times(receipt.receipt_id, 8), pool[(index + 1) % POOL]!.receipt_id, crypto.randomUUID()]),
              client_id: headerValue([...times(receipt.client_id, 8), clients[1 - own]!.clientId, uniqueId("pos-nobody")]),
              chain_id: headerValue([...times(receipt.chain_id, 8), "fz-d-a1", "fz-d-b"]),
              app_user_id: headerValue([...times(receipt.app_user_id, 8), "au-1", "au-9"]),
            }),
            strayBody,
          )
          .map(([headers, body]) => ({ headers, body }));
      });

      await runCampaign(
        "delete",
        requests,
        ({ headers, body }) => call(PATHS.delete, { headers, body }),
        async ({ headers }, { answer }) => {
          const [expected, receipt] = expectedDelete(headers, clients, tokens, pool, deleted);
          if (answer.status !== expected) throw new Error(`expected ${expected}, got ${answer.status}`);
          if (answer.status === 200) deleted.add(receipt!.receipt_id);
          const counts = await rowCounts();
          expect(counts).toEqual({
            ...baseline,
            receipts: baseline.receipts! - deleted.size,
            notice_outbox: baseline.notice_outbox! + deleted.size,
            audit_log: baseline.audit_log! + deleted.size,
          });
        },
        () => [...clients.map((client) => client.secret), ...tokens],
      );
    },
    CAMPAIGN_TIMEOUT_MS,
  );
});

describe("the fuzz model of repeated headers: docs/api.md#what-never-reaches-the-worker", () => {
  it("agrees with the Worker on an Authorization sent twice, empty or not (seed 1322049333 and its kin)", async () => {
    const clients = [await issueClient({ chains: ["fz-r-a"] }), await issueClient({ chains: ["fz-r-b"] })];
    const tokens = await Promise.all(clients.map((client) => loginToken(client)));
    const pool = await Promise.all([0, 1, 2].map(() => seedReceipt(clients[0]!, { app_user_id: "au-0" })));
    const owner = (receipt: SeededReceipt) => ({ receipt_id: receipt.receipt_id, client_id: receipt.client_id, chain_id: receipt.chain_id, app_user_id: receipt.app_user_id });
    const cases: Record<string, string>[] = [
      // The break `FUZZ_SEED=1322049333 FUZZ_RUNS=20000 npm run fuzz` found, as it was sent.
      {
        AUTHORIZATION: "\t",
        receipt_id: pool[0]!.receipt_id,
        CLIENT_ID: uniqueId("pos-nobody"),
        CHAIN_ID: 'fz-d","client_id":"x-a1',
        app_user_id: "au-0",
        Authorization: "\t",
        "x-c5": "8f1c2a3b4d5e6f70-FRA",
      },
      { Authorization: "", authorization: " ", ...owner(pool[0]!) },
      { AUTHORIZATION: "\t", Authorization: `Bearer ${tokens[0]}`, ...owner(pool[1]!) },
      { Authorization: `Bearer ${tokens[0]}`, authorization: "\t", ...owner(pool[2]!) },
      { Authorization: `Bearer ${tokens[0]}`, AUTHORIZATION: `Bearer ${tokens[0]}`, ...owner(pool[2]!) },
    ];
    const deleted = new Set<string>();
    const statuses: number[][] = [];
    for (const headers of cases) {
      const [expected] = expectedDelete(headers, clients, tokens, pool, deleted);
      const answer = await call(PATHS.delete, { headers });
      statuses.push([answer.status, expected]);
      if (answer.status === 200) deleted.add(asReceived(headers, "receipt_id")!);
    }
    expect(statuses).toEqual([
      [400, 400],
      [400, 400],
      [200, 200],
      [403, 403],
      [403, 403],
    ]);
  });
});

/**
 * docs/api.md#common-rules and #delete, in their order: the status delete must give these headers, as the Worker
 * receives them, and the receipt a 200 removes.
 */
function expectedDelete(
  sent: Record<string, string>,
  clients: TestClient[],
  tokens: string[],
  pool: SeededReceipt[],
  deleted: Set<string>,
): [number, SeededReceipt?] {
  const names = ["Authorization", "receipt_id", ...OWNER_FIELDS];
  const values = Object.fromEntries(names.map((name) => [name, asReceived(sent, name)]));
  if (names.some((name) => values[name] === null)) return [400];
  if (names.some((name) => !usableHeader(name, values[name]!, name === "Authorization" ? Infinity : 256))) return [406];
  const token = /^Bearer +(\S+)$/i.exec(values.Authorization!)?.[1];
  const caller = clients[tokens.indexOf(token ?? "")];
  if (!caller || caller.clientId !== values.client_id) return [403];
  const receipt = pool.find((candidate) => candidate.receipt_id === values.receipt_id);
  if (!receipt || deleted.has(receipt.receipt_id)) return [406];
  return OWNER_FIELDS.every((field) => receipt[field] === values[field]) ? [200, receipt] : [406];
}
