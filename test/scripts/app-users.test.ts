/**
 * docs/api.md#erasure, docs/api.md#export, docs/operations.md "A shopper asks to be forgotten" and
 * "Jobs": `npm run app-users -- erase|export` and `npm run jobs` themselves, against `npm start` on a throwaway local
 * state with two shards: the erasure runs as the service's Workflow. The erasure's own rules on
 * three shards are in test/api/workflows/erasure.test.ts; what the commands refuse before they
 * reach a service, in test/scripts/app-users-usage.test.ts.
 */
import type { ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MIN_FEED_SETTLE_SECONDS } from "../../src/shared/config.ts";
import { parseAuditHashKey } from "../../src/shared/audit-hash-key.ts";
import { shardTag, stampShardTag } from "../../src/shared/shard-ids.ts";
import { closeLocalStates, localState } from "../../scripts/lib/local-state.ts";
import { exportPrefix } from "../../src/storage/export.ts";
import { pseudonym } from "../../src/storage/erasure.ts";
import { sqlLiteral } from "../../src/storage/statement.ts";
import { LOCAL_SHARDS, localD1, migrateLocalShards } from "../support/local-d1.ts";
import { endGroup, expectNpmStartStopsOn, startNpmStart } from "../support/processes.ts";
import { ROOT, freshState, runScriptAsync } from "../support/run-script.ts";

const state = freshState();
let port = 0;
let dev: ChildProcess | undefined;
const appUsersArgs = (args: string[]) => [...args.slice(0, 1), "--port", String(port), "--persist-to", state, ...args.slice(1)];
// Not blocking: this process holds the local state open to look into it, and workerd closes a
// connection left idle while the process is blocked (an erasure's run, under load, for 16 s).
const appUsers = (args: string[]) => runScriptAsync("app-users", appUsersArgs(args));
const jobs = (args: string[]) => runScriptAsync("jobs", [...args, "--port", String(port)]);

/** Puts one receipt of each app user on each shard, with IDs that name the shard: one batch a shard. */
async function seed(appUserIds: readonly string[]): Promise<void> {
  for (const shard of LOCAL_SHARDS) {
    const rows = appUserIds.map((appUserId, index) => {
      const id = stampShardTag(`019aa8a4-3c1e-7000-8000-${String(index + 1).padStart(12, "0")}`, shardTag(shard));
      return `('${id}', 'chain-1', 'pos-1', ${sqlLiteral(appUserId)}, '{}', '2026-11-22T10:00:00.000Z')`;
    });
    await localD1(state, shard, `INSERT INTO receipts (receipt_id, chain_id, client_id, app_user_id, body, created_at) VALUES ${rows.join(", ")}`);
  }
}

/** Every app_user_id the receipts hold, on both shards, with its count. */
async function holders(): Promise<Record<string, number>> {
  const counts: Record<string, number> = {};
  for (const shard of LOCAL_SHARDS) {
    for (const { app_user_id } of (await localD1(state, shard, "SELECT app_user_id FROM receipts")) as { app_user_id: string }[]) {
      counts[app_user_id] = (counts[app_user_id] ?? 0) + 1;
    }
  }
  return counts;
}

const HOSTILE = `o'brien"; DELETE FROM receipts; --`;
const WILDCARD = "%";
const LONG = "q'".repeat(128);
const DASHED = "-shopper";
// Neighbours a careless match would take along: a prefix, another case, what LIKE would match.
const NEIGHBOURS = ["o'brien", `O'BRIEN"; DELETE FROM RECEIPTS; --`, "anyone", "q'", "shopper"];
// Exported, the second erased after its export.
const EXPORTED = `exported'shopper"; --`;
const EXPORTED_THEN_ERASED = "exported-then-erased";

beforeAll(async () => {
  migrateLocalShards(state);
  await seed([HOSTILE, WILDCARD, LONG, DASHED, ...NEIGHBOURS, EXPORTED, EXPORTED_THEN_ERASED]);
  // An export waits FEED_SETTLE_SECONDS after its instant: the least the service allows.
  ({ child: dev, port } = await startNpmStart(state, ["--var", `FEED_SETTLE_SECONDS:${MIN_FEED_SETTLE_SECONDS}`]));
}, 180_000);

afterAll(async () => {
  await closeLocalStates();
  if (dev) await endGroup(dev);
});

// First, while the service has run no other job: `jobs list` describes every job, one wrangler run each.
describe("docs/operations.md Jobs: npm run jobs follows an erasure started with --no-wait", () => {
  it("--no-wait prints the job, and npm run jobs shows it: kind, state, steps done of steps, start, end", async () => {
    const started = await appUsers(["erase", "--no-wait", "--json", "jobs-shopper"]);
    expect(started.status, started.stderr).toBe(0);
    const { job } = JSON.parse(started.stdout) as { job: string };
    let shown: Record<string, unknown> = {};
    for (let attempt = 0; attempt < 30 && shown.state !== "complete"; attempt += 1) {
      const result = await jobs(["show", job, "--json"]);
      expect(result.status, result.stderr).toBe(0);
      shown = JSON.parse(result.stdout);
      await new Promise((resolve) => setTimeout(resolve, 500));
    }
    expect(shown).toEqual({
      id: job,
      kind: "erasure",
      part_of: null,
      state: "complete",
      // begin, start its one part, check the parts, one look for objects of the archive's first
      // layout (none to rename), one archive page (nothing to delete), the user's exports (none
      // to delete), record and send.
      steps_done: 7,
      steps: 7,
      started: expect.any(String),
      ended: expect.any(String),
      error: null,
    });
    const listed = await jobs(["list", "--json"]);
    expect(listed.status, listed.stderr).toBe(0);
    const all = JSON.parse(listed.stdout) as { id: string; kind: string; part_of: string | null; state: string; steps_done: number }[];
    const at = all.findIndex((each) => each.id === job);
    expect(at).not.toBe(-1);
    // Two shards make one part, erasing a shard a step, listed right after its erasure.
    expect(all[at + 1]).toMatchObject({ kind: "erasure part", part_of: job, state: "complete", steps_done: 2 });
    expect((await jobs(["list"])).stdout).toMatch(/^ID\s+KIND\s+STATE\s+STEPS\s+STARTED\s+ENDED\s+ERROR$/m);
  });

  it("npm run jobs -- show of an unknown job: exit 1", async () => {
    const result = await jobs(["show", "no-such-job"]);
    expect(result.status).toBe(1);
    expect(result.stderr).toContain("No job no-such-job");
  });
});

describe("docs/api.md#erasure npm run app-users -- erase runs the erasure's job in npm start", () => {
  let heldAfterLastErasure: Record<string, number> | undefined;
  it.each([
    ["quotes, a semicolon and a comment", HOSTILE, [HOSTILE]],
    ["a LIKE wildcard", WILDCARD, [WILDCARD]],
    ["256 characters of quotes", LONG, [LONG]],
    ["a leading hyphen, after --", DASHED, ["--", DASHED]],
  ])("an app_user_id with %s: --json prints the count and the job, and exactly their receipts are gone from both shards", async (_label, appUserId, args) => {
    // What the previous case found after its erasure, read again only when this case runs alone.
    const before = heldAfterLastErasure ?? (await holders());
    const result = await appUsers(["erase", "--json", ...args]);
    expect(result.status, result.stderr).toBe(0);
    expect(JSON.parse(result.stdout)).toEqual({ app_user_id: appUserId, receipts_erased: 2, job: expect.stringMatching(/^[0-9a-f-]{36}$/) });
    const { [appUserId]: erased, ...others } = before;
    expect(erased).toBe(2);
    heldAfterLastErasure = await holders();
    expect(heldAfterLastErasure).toEqual(others);
  });

  it("a second run erases 0 and succeeds; the plain output says so, per shard", async () => {
    const result = await appUsers(["erase", HOSTILE]);
    expect(result.status, result.stderr).toBe(0);
    expect(result.stdout).toContain(`Erased 0 receipts of app user ${JSON.stringify(HOSTILE)} (s1=0, s2=0).`);
    expect(result.stdout).toMatch(/Event [0-9a-f-]{36} \(app_user\.erased\)/);
  });

  it("the audit records name the erased app user only by the Worker's keyed hash; beside the latest erasure's event, only an earlier one still to go out names them", async () => {
    const devVars = readFileSync(path.join(ROOT, ".dev.vars"), "utf8");
    const key = /^AUDIT_HASH_KEY='?([A-Za-z0-9_-]+)'?$/m.exec(devVars)![1]!;
    const hashed = await pseudonym(HOSTILE, parseAuditHashKey(key));
    const records = (await Promise.all(LOCAL_SHARDS.map((shard) => localD1(state, shard, `SELECT * FROM audit_log WHERE app_user = '${hashed}'`)))).flat();
    expect(records.filter((record) => record.receipt_id !== null)).toHaveLength(2);
    expect(records.filter((record) => record.receipt_id === null)).toHaveLength(2);
    expect(JSON.stringify(records)).not.toContain("brien");
    const events = (await localD1(state, "s1", "SELECT payload FROM notice_outbox WHERE json_extract(payload, '$.type') = 'app_user.erased'"))
      .map((row) => JSON.parse(row.payload as string))
      .filter((event) => event.app_user_id === HOSTILE);
    // The first run's event (2 receipts) waits out the pushes claimed before it (30 s) and is then
    // logged as delivered; the second run, seconds later, leaves it to go out (docs/api.md#erasure).
    expect(events.filter((event) => event.receipts === 0)).toHaveLength(1);
    expect(events.map((event) => event.receipts).filter((receipts) => receipts !== 0)).toEqual(events.length === 2 ? [2] : []);
  });

});

describe("docs/api.md#export npm run app-users -- export runs the export's job in npm start", () => {
  const out = mkdtempSync(path.join(tmpdir(), "receipts-export-"));
  const exportedIn = (file: string) => readFileSync(file, "utf8").trimEnd().split("\n").map((line) => JSON.parse(line) as Record<string, unknown>);

  it("--out and --json: the file holds the app user's receipt on each shard once, nothing of another, then the summary; npm run jobs shows the export", async () => {
    const file = path.join(out, "exported.ndjson");
    const result = await appUsers(["export", "--out", file, "--json", EXPORTED]);
    expect(result.status, result.stderr).toBe(0);
    const printed = JSON.parse(result.stdout) as { job: string; occurred_at: string };
    expect(printed).toEqual({
      app_user_id: EXPORTED,
      job: expect.stringMatching(/^[0-9a-f-]{36}$/),
      out: file,
      occurred_at: expect.any(String),
      receipts: 2,
      archived_receipts: 0,
      audit_records: 0,
      by_chain: { "chain-1": 2 },
      archive_read: true,
    });
    const lines = exportedIn(file);
    const receipts = lines.filter((line) => "receipt_id" in line);
    expect(receipts.map((line) => line.receipt_id as string).sort()).toEqual(
      LOCAL_SHARDS.map((shard) => stampShardTag("019aa8a4-3c1e-7000-8000-000000000010", shardTag(shard))).sort(),
    );
    for (const line of receipts) {
      expect(line).toMatchObject({ chain_id: "chain-1", client_id: "pos-1", created_at: "2026-11-22T10:00:00.000Z", archived: false, receipt: {} });
    }
    expect(lines.at(-1)).toEqual({ summary: { job_id: printed.job, occurred_at: printed.occurred_at, receipts: 2, archived_receipts: 0, by_chain: { "chain-1": 2 }, audit_records: 0, archive_read: true } });
    expect(lines).toHaveLength(3);

    const shown = await jobs(["show", printed.job, "--json"]);
    expect(shown.status, shown.stderr).toBe(0);
    expect(JSON.parse(shown.stdout)).toMatchObject({ id: printed.job, kind: "export", part_of: null, state: "complete", error: null });
  });

  it("without --out the file goes to standard output, NDJSON alone; the plain --out output counts it", async () => {
    // Two jobs of their own, at once: each waits out the feed's settle (MIN_FEED_SETTLE_SECONDS).
    const [result, plain] = await Promise.all([
      appUsers(["export", "anyone"]),
      appUsers(["export", "--out", path.join(out, "nobody.ndjson"), "nobody-at-all"]),
    ]);
    expect(result.status, result.stderr).toBe(0);
    const lines = result.stdout.trimEnd().split("\n").map((line) => JSON.parse(line) as Record<string, { receipts?: number }>);
    expect(lines).toHaveLength(3);
    expect(lines.at(-1)!.summary).toMatchObject({ receipts: 2, archived_receipts: 0 });

    expect(plain.status, plain.stderr).toBe(0);
    expect(plain.stdout).toMatch(/^Exported 0 receipts \(0 archived\) and 0 audit records of app user "nobody-at-all" as of \S+ to \S+nobody\.ndjson; job [0-9a-f-]{36}\.\n$/);
  });

  it("an erasure of the app user takes their export's file from the archive's bucket at once", async () => {
    const exported = await appUsers(["export", "--out", path.join(out, "then-erased.ndjson"), "--json", EXPORTED_THEN_ERASED]);
    expect(exported.status, exported.stderr).toBe(0);
    const { job } = JSON.parse(exported.stdout) as { job: string };
    const chunks = async () =>
      (await localState({ remote: false, persistTo: state }, path.join(ROOT, "wrangler.jsonc")).r2("ARCHIVE", (bucket) => bucket.list({ prefix: exportPrefix(job) }))).objects.length;
    expect(await chunks()).toBeGreaterThan(0);
    const erased = await appUsers(["erase", "--json", EXPORTED_THEN_ERASED]);
    expect(erased.status, erased.stderr).toBe(0);
    expect(await chunks()).toBe(0);
  });
});

describe("docs/operations.md Jobs: the commands find npm start on the port it recorded in its state", () => {
  it("npm start records its port in the state it serves", () => {
    expect(JSON.parse(readFileSync(path.join(state, "npm-start.json"), "utf8"))).toEqual({ port, pid: expect.any(Number) });
  });

  it("erase without --port reaches npm start on its own port, through the state it serves", async () => {
    const result = await runScriptAsync("app-users", ["erase", "--json", "found-by-its-record", "--persist-to", state]);
    expect(result.status, result.stderr).toBe(0);
    expect(JSON.parse(result.stdout)).toMatchObject({ app_user_id: "found-by-its-record", receipts_erased: 0 });
  });
});

describe("npm start stops everything it started: docs/api.md#local-use", () => {
  it("SIGTERM to npm alone, after the erasures, ends wrangler dev and both workerd, freeing the port, and forgets its port", async () => {
    await expectNpmStartStopsOn("SIGTERM", dev!, port);
    expect(existsSync(path.join(state, "npm-start.json"))).toBe(false);
  });
});
