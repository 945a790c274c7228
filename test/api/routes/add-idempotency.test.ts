/** add: Idempotency-Key replays, conflicts, races, and the cron job that forgets old keys. */
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { runScheduledJobs } from "../../../src/api/scheduled.ts";
import { IDEMPOTENCY_WINDOW_MS, storeReceipt } from "../../../src/storage/receipts.ts";
import {
  issueClient,
  expectRefused,
  loggedRequests,
  newCaller,
  postAdd,
  rowCounts,
  signTestToken,
  uniqueId,
  validReceiptBody,
} from "../../support/api.ts";
import { SHARDS, idOn, receiptsOf, rowsOnEveryShard, storedReceipt } from "../../support/shards.ts";
import { placeReceipt } from "../../../src/storage/placement.ts";
import { newCreationNotice } from "../../../src/api/events.ts";

describe("docs/api.md#idempotency idempotency", () => {
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
  // On the shard that a new call with this key goes to, as an add back then would have.
  const { target } = placeReceipt(SHARDS, new Map(), { key, now: Date.now(), failing: new Set() })!;
  const data = {
    receipt_id: idOn(target),
    chain_id: "chain-old",
    client_id: clientId,
    app_user_id: "au-old",
    created_at: new Date(createdAt).toISOString(),
  };
  // Its created event is made now, as its receipt_id is: add commits no event_id older than a few
  // seconds (docs/api.md#event-feed), and the key's age is what these tests are about.
  const event = newCreationNotice({ ...data, created_at: new Date().toISOString() }, target);
  const outcome = await storeReceipt(target, { ...data, body: "{}", user_key: "hmac-sha256:au-old" }, event, {
    key,
    fingerprint: "an older request",
    response: { data, status: "OK", status_code: 200 },
  });
  expect(outcome).toMatchObject({ kind: "added" });
}

describe("docs/api.md#idempotency idempotency: expired keys are cleaned up by the cron job", () => {
  it("deletes every key older than 24 hours, past one chunk, and keeps the younger ones", async () => {
    const now = Date.now();
    const { clientId } = await issueClient();
    await rememberKey(clientId, "young", now - IDEMPOTENCY_WINDOW_MS + 60_000);
    // 2,500 expired keys at once: more than the job deletes in one statement.
    await SHARDS[0]!.db.prepare(
      `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 2500)
       INSERT INTO idempotency_keys (client_id, idempotency_key, fingerprint, receipt_id, response, created_at)
       SELECT ?1, 'expired-' || i, 'f', 'r-' || i, '{}', ?2 FROM n`,
    )
      .bind(clientId, new Date(now - IDEMPOTENCY_WINDOW_MS - 1).toISOString())
      .run();
    const expiredBefore = await countKeysOlderThan(now - IDEMPOTENCY_WINDOW_MS);
    expect(expiredBefore).toBeGreaterThanOrEqual(2500);

    const lines = await loggedRequests(() => runScheduledJobs(env, new Date(now)));
    const onFirstShard = (line: Record<string, unknown>) => line.shard === SHARDS[0]!.name;
    expect(lines.find((line) => line.job === "idempotency-keys.delete-expired" && onFirstShard(line))).toMatchObject({
      level: "info",
      event: "scheduled",
      deleted: expiredBefore,
    });
    expect(await countKeysOlderThan(now - IDEMPOTENCY_WINDOW_MS)).toBe(0);
    const young = await rowsOnEveryShard("SELECT 1 FROM idempotency_keys WHERE client_id = ? AND idempotency_key = 'young'", clientId);
    expect(young).toHaveLength(1);
  });
});

async function countKeysOlderThan(instant: number): Promise<number> {
  const rows = await rowsOnEveryShard<{ n: number }>(
    "SELECT COUNT(*) AS n FROM idempotency_keys WHERE created_at < ?",
    new Date(instant).toISOString(),
  );
  return rows.reduce((sum, { n }) => sum + n, 0);
}
