/**
 * docs/operations.md: a local command that fails prints no result on standard output. A shard is
 * made unreadable for good (its table behind a view that fails when read), so that no wait helps:
 * `notices failed` and `shards list` print nothing that reads as an answer, and `notices replay`
 * names what it replayed on the other shard and what it left failed.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { closeLocalStates } from "../../scripts/lib/local-state.ts";
import { shardTag, stampShardTag } from "../../src/shared/shard-ids.ts";
import { localD1, migrateLocalShards } from "../support/local-d1.ts";
import { freshState, runScriptAsync } from "../support/run-script.ts";

const state = freshState();
const run = (name: string, ...args: string[]) => runScriptAsync(name, [...args, "--persist-to", state]);
const ON_S1 = stampShardTag("019aa8a4-3c1e-7d2b-9f41-6c0e5b2d8a17", shardTag("s1"));
const ON_S2 = stampShardTag("019aa8a4-3c1e-7d2b-9f41-6c0e5b2d8a18", shardTag("s2"));

/** Puts `table` of shard s1 behind a view that fails whenever it is read: "malformed JSON". */
async function breakOnS1(table: string): Promise<void> {
  await localD1(state, "s1", `ALTER TABLE ${table} RENAME TO ${table}_kept`);
  await localD1(state, "s1", `CREATE VIEW ${table} AS SELECT * FROM ${table}_kept WHERE json('not json') IS NOT NULL`);
}

beforeAll(async () => {
  migrateLocalShards(state);
  for (const [shard, eventId] of [["s1", ON_S1], ["s2", ON_S2]] as const) {
    const payload = JSON.stringify({ event_id: eventId, type: "receipt.deleted", receipt_id: "r-1" });
    await localD1(
      state,
      shard,
      `INSERT INTO failed_notices (event_id, receipt_id, payload, created_at, failed_at, attempts, last_error)
       VALUES ('${eventId}', 'r-1', '${payload}', '2026-11-22T10:00:00.000Z', '2026-11-22T10:50:00.000Z', 11, 'HTTP 410')`,
    );
  }
  await breakOnS1("failed_notices");
  await breakOnS1("receipts");
  // The commands open the state themselves.
  await closeLocalStates();
}, 120_000);
afterAll(() => closeLocalStates());

describe("docs/operations.md a local command that fails prints no result on standard output", () => {
  it("notices failed --json with a shard unreadable: exit 1, nothing on standard output, the shard and the others' count on standard error", async () => {
    const result = await run("notices", "failed", "--json");
    expect(result.status, result.stderr).toBe(1);
    expect(result.stdout).toBe("");
    expect(result.stderr).toContain("Shard s1: ");
    expect(result.stderr).toContain("malformed JSON");
    expect(result.stderr).toContain("No list printed: it would miss the notices of the shard(s) above. The shards that answered hold 1 failed notice");
  });

  it("notices failed, the text for a person, likewise prints no partial list", async () => {
    const result = await run("notices", "failed");
    expect([result.status, result.stdout]).toEqual([1, ""]);
  });

  it("shards list --json with a shard unreadable: exit 1, no row with null counts, the shard's error on standard error", async () => {
    const result = await run("shards", "list", "--json");
    expect(result.status, result.stderr).toBe(1);
    expect(result.stdout).toBe("");
    expect(result.stderr).toMatch(/^Could not read shard s1: .*malformed JSON/m);
    expect(result.stderr).toContain("No list printed");
  });

  it("notices replay with a shard unreadable: the other shard's notice is replayed and listed; exit 1 naming what stays failed and what was replayed", async () => {
    const result = await run("notices", "replay");
    expect(result.status, result.stderr).toBe(1);
    expect(result.stdout).toContain(`${ON_S2}\tshard=s2`);
    expect(result.stdout).not.toContain(ON_S1);
    expect(result.stderr).toContain("Shard s1: ");
    expect(result.stderr).toContain("Not replayed: every failed notice of shard s1, still in the failed list.");
    expect(result.stderr).toContain("Replayed: the 1 listed on standard output. Run the same command again for the rest.");
    expect(await localD1(state, "s2", "SELECT event_id FROM notice_outbox")).toEqual([{ event_id: ON_S2 }]);
  });

  it("notices replay of named event_ids on an unreadable shard names them as not replayed", async () => {
    const result = await run("notices", "replay", ON_S1);
    expect([result.status, result.stdout]).toEqual([1, ""]);
    expect(result.stderr).toContain(`Not replayed: ${ON_S1} of shard s1, still in the failed list.`);
    expect(result.stderr).toContain("Replayed: nothing.");
  });
});
