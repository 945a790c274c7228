/**
 * The fill check (docs/api.md#shards), in a file of its own: it starts from an isolate that has
 * seen no shard's size yet, and it makes every shard count as full.
 */
import { createExecutionContext, waitOnExecutionContext } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { beforeEach, describe, expect, it } from "vitest";
import { createApp } from "../../src/api/app.ts";
import { PATHS } from "../../src/shared/paths.ts";
import { shardStateKey, type ShardState } from "../../src/shared/shard-ids.ts";
import { shardOfId } from "../../src/storage/shards.ts";
import { BASE, consoleLines, newCaller, validReceiptBody, type Caller } from "../support/api.ts";
import { SHARDS } from "../support/shards.ts";

// Each test's own app: the sizes it sees and its last alarm are remembered across the test's calls only.
let app = createApp();
beforeEach(() => {
  app = createApp();
});

/** An add through the test's app with a fill threshold of one byte: every write passes it. */
async function addPastThreshold(caller: Caller): Promise<string> {
  const ctx = createExecutionContext();
  const request = new Request(BASE + PATHS.add, {
    method: "POST",
    headers: caller.headers,
    body: JSON.stringify(validReceiptBody()),
  });
  const response = await app.fetch(request, { ...env, SHARD_FILL_BYTES: "1" }, ctx);
  const body = (await response.json()) as { data: { receipt_id: string } };
  await waitOnExecutionContext(ctx);
  expect(response.status).toBe(200);
  return shardOfId(SHARDS, body.data.receipt_id)!.name;
}

async function stateOf(name: string): Promise<ShardState | null> {
  return env.SHARD_STATES.get<ShardState>(shardStateKey(name), "json");
}

describe("docs/api.md#shards the fill check", () => {
  it("a shard past the threshold closes itself while another has room; when none has, adds go on and an alert line is logged", async () => {
    const caller = await newCaller();
    // Two shards fill up and close themselves in turn: each time another shard, unseen, has room.
    const first = await addPastThreshold(caller);
    expect(await stateOf(first)).toMatchObject({ state: "closed", by: "fill" });
    const second = await addPastThreshold(caller);
    expect(second).not.toBe(first);
    expect(await stateOf(second)).toMatchObject({ state: "closed", by: "fill" });

    // The last open shard is past the threshold too: it keeps taking receipts, and the log says so.
    let third = "";
    const lines = await consoleLines(async () => {
      third = await addPastThreshold(caller);
    });
    expect([first, second]).not.toContain(third);
    expect(await stateOf(third)).toBeNull();
    const alarms = lines.map((line) => JSON.parse(line) as Record<string, unknown>).filter((line) => line.event === "shards-full");
    expect(alarms).toEqual([expect.objectContaining({ level: "error", shard: third })]);

    // At most once a minute per isolate.
    const again = await consoleLines(() => addPastThreshold(caller));
    expect(again.filter((line) => line.includes('"shards-full"'))).toEqual([]);
  });
});
