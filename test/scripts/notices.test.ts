import { readFileSync } from "node:fs";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { closeLocalStates } from "../../scripts/lib/local-state.ts";
import { shardTag, stampShardTag } from "../../src/shared/shard-ids.ts";
import { EVENT_ID_PATTERN, replayFailed } from "../../src/storage/outbox/statements.ts";
import { withTextParams } from "../../src/storage/statement.ts";
import { migrateLocalShards, localD1 } from "../support/local-d1.ts";
import { freshState, runScriptAsync } from "../support/run-script.ts";

const state = freshState();
const notices = (...args: string[]) => runScriptAsync("notices", [...args, "--persist-to", state]);

/**
 * The fields docs/api.md names for a command's JSON rows: the first `{"a", "b"}` after the
 * command's name in the text, so that a script reading the output can rely on the page.
 */
function documentedFields(command: string): string[] {
  const page = readFileSync(path.join(import.meta.dirname, "../../docs/api.md"), "utf8");
  const from = page.indexOf(`\`${command}\` prints`);
  expect(from, `docs/api.md says what \`${command}\` prints`).toBeGreaterThan(-1);
  const fields = /`\{([^}]*)\}`/.exec(page.slice(from))![1]!;
  return [...fields.matchAll(/"([a-z_]+)"/g)].map((match) => match[1]!);
}

/** Runs SQL on a shard of the throwaway local D1; returns its rows. */
const d1 = (shard: string, sql: string) => localD1(state, shard, sql);

/** Dead letters as the notifier's dead-letter consumer stores them on a shard, in one statement. */
async function storeFailed(shard: string, ...notices: [eventId: string, type: string, receiptId: string, failedAt: string, lastError: string][]): Promise<void> {
  const rows = notices.map(([eventId, type, receiptId, failedAt, lastError]) => {
    const payload = JSON.stringify({ event_id: eventId, type, receipt_id: receiptId });
    return `('${eventId}', '${receiptId}', '${payload}', '2026-11-22T10:00:00.000Z', '${failedAt}', 11, '${lastError}')`;
  });
  await d1(shard, `INSERT INTO failed_notices (event_id, receipt_id, payload, created_at, failed_at, attempts, last_error) VALUES ${rows.join(", ")}`);
}

const UUID = "019aa8a4-3c1e-7d2b-9f41-6c0e5b2d8a1";
// Event ids as the Workers make them: each names its shard in its rand_a bits.
const FIRST = stampShardTag(`${UUID}7`, shardTag("s1"));
const SECOND = stampShardTag(`${UUID}8`, shardTag("s2"));
const THIRD = stampShardTag(`${UUID}9`, shardTag("s1"));
/** A well-formed event_id whose tag is no shard's. */
const NOWHERE = `${UUID}7`;

beforeAll(async () => {
  expect([shardTag("s1"), shardTag("s2")]).not.toContain(0xd2b);
  migrateLocalShards(state);
}, 120_000);
afterAll(() => closeLocalStates());

// Each case is a process of its own that writes nothing: they run at once.
describe.concurrent("docs/api.md#operators npm run notices: bad arguments", () => {
  it.each([
    ["no command", []],
    ["an unknown command", ["resend"]],
    ["an unknown flag", ["failed", "--all"]],
    ["an argument to failed", ["failed", FIRST]],
    ["a malformed event_id", ["replay", "not-an-id"]],
    ["SQL in place of an event_id", ["replay", `${FIRST}') OR 1=1 --`]],
    ["a UUID of another version", ["replay", "4a6f4b1e-3c1e-4d2b-9f41-6c0e5b2d8a17"]],
    ["an event_id that names no shard", ["replay", NOWHERE]],
    ["an event_id that names no shard beside one that does", ["replay", FIRST, NOWHERE]],
    ["1,001 event_ids, one more than a replay takes", ["replay", ...Array.from({ length: 1001 }, () => FIRST)]],
  ])("%s: usage on standard error, exit 2", async (_label, args) => {
    const result = await notices(...args);
    expect(result.status).toBe(2);
    expect(result.stderr).toContain("Usage: npm run notices");
    expect(result.stdout).toBe("");
  });

  it("--remote with --persist-to: exit 2", async () => {
    const result = await runScriptAsync("notices", ["failed", "--remote", "--persist-to", state]);
    expect(result.status).toBe(2);
  });
});

describe("docs/api.md#operators npm run notices: failed and replay across shards", () => {
  it("failed lists the failed notices of every shard, naming each one's shard; replay moves one back to its shard's outbox", async () => {
    await storeFailed(
      "s1",
      [FIRST, "receipt.deleted", "r-first", "2026-11-22T10:50:00.000Z", "HTTP 410 from the push service"],
      [THIRD, "receipt.created", "r-third", "2026-11-22T10:52:00.000Z", "HTTP 400 from the push service"],
    );
    await storeFailed("s2", [SECOND, "receipt.deleted", "r-second", "2026-11-22T10:51:00.000Z", "HTTP 503 from the push service"]);
    const listed = await notices("failed", "--json");
    expect(listed.status, listed.stderr).toBe(0);
    expect(JSON.parse(listed.stdout)).toEqual([
      { event_id: FIRST, type: "receipt.deleted", shard: "s1", receipt_id: "r-first", failed_at: "2026-11-22T10:50:00.000Z", attempts: 11, last_error: "HTTP 410 from the push service" },
      { event_id: SECOND, type: "receipt.deleted", shard: "s2", receipt_id: "r-second", failed_at: "2026-11-22T10:51:00.000Z", attempts: 11, last_error: "HTTP 503 from the push service" },
      { event_id: THIRD, type: "receipt.created", shard: "s1", receipt_id: "r-third", failed_at: "2026-11-22T10:52:00.000Z", attempts: 11, last_error: "HTTP 400 from the push service" },
    ]);
    expect(Object.keys(JSON.parse(listed.stdout)[0])).toEqual(documentedFields("notices -- failed --json"));

    const replayed = await notices("replay", FIRST);
    expect(replayed.status, replayed.stderr).toBe(0);
    expect(replayed.stdout).toContain(`${FIRST}\tshard=s1`);
    expect(replayed.stdout).toContain("within a minute");
    expect(await d1("s1", "SELECT event_id, enqueued_at, delivered_at, attempts FROM notice_outbox")).toEqual([
      { event_id: FIRST, enqueued_at: null, delivered_at: null, attempts: 0 },
    ]);
    const text = await notices("failed");
    expect(text.status, text.stderr).toBe(0);
    expect(text.stdout.split("\n")).toEqual([
      "EVENT_ID                              TYPE             SHARD  RECEIPT_ID  FAILED_AT                 ATTEMPTS  LAST_ERROR",
      `${SECOND}  receipt.deleted  s2     r-second    2026-11-22T10:51:00.000Z  11        HTTP 503 from the push service`,
      `${THIRD}  receipt.created  s1     r-third     2026-11-22T10:52:00.000Z  11        HTTP 400 from the push service`,
      "",
    ]);
  });

  it("replay of an event_id that is not a failed notice: exit 1 naming it; the others given are replayed on their shards", async () => {
    const result = await notices("replay", SECOND, FIRST);
    expect(result.status).toBe(1);
    expect(result.stdout).toContain(`${SECOND}\tshard=s2`);
    expect(result.stderr).toContain(`No failed notice ${FIRST}`);
  });

  it("replay without event_ids replays every failed notice on every shard", async () => {
    const result = await notices("replay");
    expect(result.status, result.stderr).toBe(0);
    expect(result.stdout).toContain(`${THIRD}\tshard=s1`);
    expect((await notices("failed")).stdout.trim()).toBe("No failed notices.");
  });
});

describe("docs/api.md#operators replay takes event ids as values, never as SQL", () => {
  it("accepts only an event_id as this service makes them", () => {
    expect(EVENT_ID_PATTERN.test(FIRST)).toBe(true);
    for (const bad of ["", `${FIRST} `, FIRST.toUpperCase(), `'${FIRST}'`, `${FIRST};DROP TABLE receipts`]) {
      expect(EVENT_ID_PATTERN.test(bad)).toBe(false);
    }
  });

  it("the ids go in as one parameter, and sent to D1's query API they stay one, out of the SQL, whatever they hold", () => {
    const hostile = `${FIRST}') OR 1=1; DROP TABLE receipts; --`;
    for (const replayStatement of replayFailed([hostile, SECOND])) {
      expect(replayStatement.sql).not.toContain(FIRST);
      expect(replayStatement.params).toEqual([JSON.stringify([hostile, SECOND])]);
      const { sql, params } = withTextParams(replayStatement);
      expect(params).toEqual([JSON.stringify([hostile, SECOND])]);
      for (const leak of ["OR 1=1", "DROP", FIRST, SECOND]) expect(sql).not.toContain(leak);
    }
    // No ids: every failed notice, through the same text.
    expect(replayFailed([]).map(({ params }) => params)).toEqual([["[]"], ["[]"]]);
  });
});
