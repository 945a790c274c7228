/**
 * docs/operations.md "The archive": `npm run archive -- run` and `status` themselves, against
 * `npm start` on a throwaway local state with two shards and its local R2 bucket. The move's own
 * rules are in test/api/workflows/archive.test.ts.
 */
import type { ChildProcess } from "node:child_process";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { closeLocalStates } from "../../scripts/lib/local-state.ts";
import { shardTag, stampShardTag } from "../../src/shared/shard-ids.ts";
import { LOCAL_SHARDS, localD1, migrateLocalShards } from "../support/local-d1.ts";
import { endGroup, expectNpmStartStopsOn, startNpmStart } from "../support/processes.ts";
import { freshState, runScript } from "../support/run-script.ts";

const state = freshState();
let port = 0;
let dev: ChildProcess | undefined;
const archive = (args: string[]) => runScript("archive", args);

/** A UUIDv7-shaped receipt_id made at `at` on a shard. */
function idAt(at: number, serial: number, shard: string): string {
  const hex = at.toString(16).padStart(12, "0");
  return stampShardTag(`${hex.slice(0, 8)}-${hex.slice(8)}-7000-8000-${String(serial).padStart(12, "0")}`, shardTag(shard));
}

// Two receipts a shard from a year ago, past any archive age, and one from an hour ago.
beforeAll(async () => {
  migrateLocalShards(state);
  const [old, young] = [Date.now() - 400 * 24 * 60 * 60 * 1000, Date.now() - 60 * 60 * 1000];
  for (const shard of LOCAL_SHARDS) {
    const rows = ([[1, old], [2, old], [3, young]] as const).map(
      ([serial, at]) => `('${idAt(at, serial, shard)}', 'chain-1', 'pos-1', 'au-${serial}', '{"n":${serial}}', '${new Date(at).toISOString()}')`,
    );
    await localD1(state, shard, `INSERT INTO receipts (receipt_id, chain_id, client_id, app_user_id, body, created_at) VALUES ${rows.join(", ")}`);
  }
  // Closed until the read after the runs, which opens its own: workerd closes a connection left
  // idle while this process is blocked, and each command here blocks it (the runs, under load, for
  // tens of seconds), so that read once failed on the closed one ("fetch failed", "other side
  // closed"), as test/scripts/app-users.test.ts's did before its commands stopped blocking.
  await closeLocalStates();
  ({ child: dev, port } = await startNpmStart(state));
}, 180_000);

afterAll(async () => {
  await closeLocalStates();
  if (dev) await endGroup(dev);
});

describe("docs/operations.md npm run archive", () => {
  it("refuses bad arguments with the usage and exit 2", () => {
    for (const args of [[], ["move"], ["run", "--shard", "S1"], ["run", "--remote", "--port", "1"], ["status", "extra"]]) {
      const result = archive(args);
      expect(result.status, args.join(" ")).toBe(2);
      expect(result.stderr).toContain("Usage: npm run archive");
    }
  });

  it("status shows what waits; run moves it on one shard, then on all; status then shows it archived", async () => {
    const status = () => JSON.parse(archive(["status", "--json", "--persist-to", state]).stdout) as Record<string, unknown>[];
    expect(status()).toEqual(LOCAL_SHARDS.map((shard) => ({ shard, due: 2, archived: 0, objects: 0, bytes: 0, last_run: null })));

    const one = archive(["run", "--shard", "s2", "--json", "--port", String(port)]);
    expect(one.status, one.stderr).toBe(0);
    expect(JSON.parse(one.stdout)).toEqual([expect.objectContaining({ shard: "s2", receipts: 2, objects: 2, complete: true })]);
    const all = archive(["run", "--json", "--port", String(port)]);
    expect(all.status, all.stderr).toBe(0);
    expect((JSON.parse(all.stdout) as { receipts: number }[]).map(({ receipts }) => receipts)).toEqual([2, 0]);

    const after = status();
    for (const shard of after) {
      expect(shard).toMatchObject({ due: 0, archived: 2, objects: 2, bytes: expect.any(Number), last_run: expect.objectContaining({ receipts: expect.any(Number) }) });
      expect(shard.bytes).toBeGreaterThan(200);
    }
    for (const shard of LOCAL_SHARDS) expect(await localD1(state, shard, "SELECT COUNT(*) AS n FROM receipts")).toEqual([{ n: 1 }]);

    const jobs = runScript("jobs", ["list", "--json", "--port", String(port)]);
    expect(JSON.parse(jobs.stdout)).toEqual(expect.arrayContaining([expect.objectContaining({ kind: "archive", state: "complete" })]));
  }, 180_000);
});

describe("npm start stops everything it started: docs/api.md#local-use", () => {
  it("SIGINT to npm alone, after the archive's runs, ends wrangler dev and both workerd, freeing the port", async () => {
    await expectNpmStartStopsOn("SIGINT", dev!, port);
  });
});
