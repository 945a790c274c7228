/**
 * The fill check (docs/api.md#shards), in a file of its own: it starts from an isolate that has
 * seen no shard's size yet, and it makes every shard count as full.
 */
import { createExecutionContext, waitOnExecutionContext } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createApp } from "../../src/api/app.ts";
import { PATHS } from "../../src/shared/paths.ts";
import { shardStateKey, type ShardState } from "../../src/shared/shard-ids.ts";
import { newPlacementMemory } from "../../src/storage/placement.ts";
import { checkShardFill } from "../../src/storage/shard-fill.ts";
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
    expect(await stateOf(third)).toMatchObject({ state: "open", full: { bytes: expect.any(Number) } });
    const alarms = lines.map((line) => JSON.parse(line) as Record<string, unknown>).filter((line) => line.event === "shards-full");
    expect(alarms).toEqual([expect.objectContaining({ level: "error", shard: third })]);

    // At most once a minute per isolate.
    const again = await consoleLines(() => addPastThreshold(caller));
    expect(again.filter((line) => line.includes('"shards-full"'))).toEqual([]);
  });
});

describe("docs/api.md#shards the fill check decides from the recorded states", () => {
  const [a, b, c] = SHARDS;
  const THRESHOLD = 1_000;

  // Before each too: the file's first test leaves shards closed by the fill check, at random.
  const clearStates = async () => {
    await Promise.all(SHARDS.map((shard) => env.SHARD_STATES.delete(shardStateKey(shard.name))));
  };
  beforeEach(clearStates);
  afterEach(clearStates);

  /** One isolate's fill check after a write that took `shard` past the threshold. */
  function crossed(shard: (typeof SHARDS)[number], memory = newPlacementMemory()): Promise<void> {
    return checkShardFill(env.SHARD_STATES, { shard, bytes: THRESHOLD + 1 }, { shards: SHARDS, thresholdBytes: THRESHOLD, now: new Date() }, memory);
  }

  async function closeByOperator(name: string): Promise<void> {
    const state: ShardState = { state: "closed", changed_at: new Date().toISOString(), by: "operator" };
    await env.SHARD_STATES.put(shardStateKey(name), JSON.stringify(state));
  }

  it("two isolates whose shards cross the threshold together never close the last open shard", async () => {
    await closeByOperator(c!.name);
    // Two fresh isolates: neither has seen the other's shard, which is how both closed before.
    await consoleLines(() => Promise.all([crossed(a!), crossed(b!)]));
    const open = [(await stateOf(a!.name))?.state, (await stateOf(b!.name))?.state].filter((state) => state === "open");
    expect(open.length).toBeGreaterThanOrEqual(1);
  });

  it("one after the other, the second isolate keeps its shard open once the first closed its own", async () => {
    await closeByOperator(c!.name);
    await consoleLines(() => crossed(a!));
    expect(await stateOf(a!.name)).toMatchObject({ state: "closed", by: "fill" });
    const lines = await consoleLines(() => crossed(b!));
    expect(await stateOf(b!.name)).toMatchObject({ state: "open", full: { bytes: THRESHOLD + 1 } });
    expect(lines.filter((line) => line.includes('"shards-full"'))).toHaveLength(1);
  });

  it("a shard recorded full by another isolate is no room to close into", async () => {
    await closeByOperator(c!.name);
    const full: ShardState = { state: "open", full: { bytes: THRESHOLD + 1, at: new Date().toISOString() } };
    await env.SHARD_STATES.put(shardStateKey(b!.name), JSON.stringify(full));
    // An isolate that never saw b's size: the recorded full mark decides, not its memory.
    await consoleLines(() => crossed(a!));
    expect(await stateOf(a!.name)).toMatchObject({ state: "open", full: { bytes: THRESHOLD + 1 } });
    expect(await stateOf(b!.name)).toMatchObject({ state: "open" });
  });
});
