/** add: the storage calls on its response path, and the event's hand-over after it. */
import { beforeAll, describe, expect, it } from "vitest";
import { newIsolateState } from "../../../src/api/context.ts";
import { WARM_ISOLATE, countedCall, newCaller, uniqueId, validReceiptBody } from "../../support/api.ts";
import { PATHS } from "../../../src/shared/paths.ts";

describe("docs/api.md#add cost budget: one KV read and one D1 round trip per add", () => {
  // One isolate for every call here: the first call warms it, the others are measured on it.
  const warm = newIsolateState();
  async function measuredAdd(headers: Record<string, string>): Promise<{ status: number; calls: string[]; after: string[] }> {
    const { answer, ledger } = await countedCall(PATHS.add, { headers, body: JSON.stringify(validReceiptBody()) }, WARM_ISOLATE, warm);
    return { status: answer.status, calls: ledger.names("response"), after: ledger.names("after").sort() };
  }

  // A stored receipt's created event goes to the queue after the answer, with no second D1
  // write: the add's batch is its only one.
  const EVENT_HANDED_OVER = ["queue.send"];

  beforeAll(async () => {
    const { headers } = await newCaller();
    const cold = await countedCall(PATHS.add, { headers, body: JSON.stringify(validReceiptBody()) }, WARM_ISOLATE, warm);
    // A cold isolate reads the shard states once, in the same bulk read for every shard.
    expect(cold.ledger.names("response")).toEqual(["kv.get", "kv.get", "d1.batch"]);
  });

  it("with an Idempotency-Key, first call and replay: one KV get and one D1 batch; a replay hands over no event", async () => {
    const { headers } = await newCaller();
    const keyed = { ...headers, "Idempotency-Key": uniqueId("key") };
    expect(await measuredAdd(keyed)).toEqual({ status: 200, calls: ["kv.get", "d1.batch"], after: EVENT_HANDED_OVER });
    expect(await measuredAdd(keyed)).toEqual({ status: 200, calls: ["kv.get", "d1.batch"], after: [] });
  });

  it("without an Idempotency-Key: one KV get and one D1 batch (the receipt and its event)", async () => {
    const { headers } = await newCaller();
    expect(await measuredAdd(headers)).toEqual({ status: 200, calls: ["kv.get", "d1.batch"], after: EVENT_HANDED_OVER });
  });

  it("a refused body costs one KV get and no D1 call at all", async () => {
    const { headers } = await newCaller();
    const { answer, ledger } = await countedCall(PATHS.add, { headers, body: "{}" }, WARM_ISOLATE, warm);
    expect(answer.status).toBe(406);
    expect(ledger.names()).toEqual(["kv.get"]);
  });
});
