/**
 * docs/operations.md: the local operator commands run beside `npm start`, with adds flowing, and
 * beside each other. The local runtime answers a call that finds the state's files held by the
 * other with errors of its own (`Failed to get session commit token: internal error`, `internal
 * error; reference = …`); each command waits them out and gives its answer. Which errors count,
 * and the bound, are in test/scripts/lib/local-state.test.ts.
 */
import type { ChildProcess } from "node:child_process";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { closeLocalStates } from "../../scripts/lib/local-state.ts";
import { PATHS } from "../../src/shared/paths.ts";
import { shardTag, stampShardTag } from "../../src/shared/shard-ids.ts";
import { POS_SCOPE } from "../../src/shared/types.ts";
import { LOCAL_SHARDS, localD1, migrateLocalShards } from "../support/local-d1.ts";
import { endGroup, startNpmStart } from "../support/processes.ts";
import { freshState, runScriptAsync, type ScriptResult } from "../support/run-script.ts";

const state = freshState();
let dev: ChildProcess | undefined;
let port = 0;
const ROUNDS = 4;

/** Adds sent while the commands run, by status; `stop` ends the loop. */
const adds = { statuses: new Map<number, number>(), stop: false, loop: Promise.resolve() };

const command = (name: string, ...args: string[]) => runScriptAsync(name, [...args, "--persist-to", state]);

/** A failed notice on `shard` as the notifier's dead-letter consumer stores it; its event_id. */
async function storeFailed(shard: (typeof LOCAL_SHARDS)[number], round: number): Promise<string> {
  const eventId = stampShardTag(`019aa8a4-3c1e-7d2b-9f41-6c0e5b2d8${String(round).padStart(3, "0")}`, shardTag(shard));
  const payload = JSON.stringify({ event_id: eventId, type: "receipt.deleted", receipt_id: `r-${round}` });
  await localD1(
    state,
    shard,
    `INSERT INTO failed_notices (event_id, receipt_id, payload, created_at, failed_at, attempts, last_error)
     VALUES ('${eventId}', 'r-${round}', '${payload}', '2026-11-22T10:00:00.000Z', '2026-11-22T10:50:00.000Z', 11, 'HTTP 410 from the push service')`,
  );
  return eventId;
}

/** Adds one receipt after another until told to stop, as a till does. */
async function addUntilStopped(client: { client_id: string; client_secret: string }): Promise<void> {
  const base = `http://127.0.0.1:${port}`;
  const login = await fetch(`${base}${PATHS.login}`, {
    method: "POST",
    headers: { client_id: client.client_id, client_secret: client.client_secret, token_type: "Bearer", scope: POS_SCOPE },
  });
  const token = ((await login.json()) as { data: { access_token: string } }).data.access_token;
  const body = JSON.stringify({ purchased_at: "2026-11-22T14:03:00+01:00", currency: "EUR", total: 598, line_items: [{ description: "Oat milk 1 l", quantity: 2, unit_price: 299, total: 598 }] });
  for (let n = 0; !adds.stop; n += 1) {
    const headers = { Authorization: `Bearer ${token}`, client_id: client.client_id, chain_id: "c1", app_user_id: `au-${n % 20}`, "Content-Type": "application/json", "Idempotency-Key": crypto.randomUUID() };
    const response = await fetch(`${base}${PATHS.add}`, { method: "POST", headers, body });
    await response.arrayBuffer();
    adds.statuses.set(response.status, (adds.statuses.get(response.status) ?? 0) + 1);
  }
}

/** What a command printed, for the message of an assertion that failed. */
const shown = (result: ScriptResult) => `exit ${result.status}\nstdout: ${result.stdout}\nstderr: ${result.stderr}`;

/** The one JSON value a successful --json command printed on standard output. */
function answer(result: ScriptResult): unknown {
  expect(result.status, shown(result)).toBe(0);
  return JSON.parse(result.stdout);
}

beforeAll(async () => {
  migrateLocalShards(state);
  ({ child: dev, port } = await startNpmStart(state));
  const issued = await command("clients", "issue", "--chain", "c1", "--json");
  expect(issued.status, shown(issued)).toBe(0);
  adds.loop = addUntilStopped(JSON.parse(issued.stdout) as { client_id: string; client_secret: string });
}, 180_000);

afterAll(async () => {
  adds.stop = true;
  await adds.loop.catch(() => undefined);
  await closeLocalStates();
  if (dev) await endGroup(dev);
});

describe("docs/operations.md local commands beside npm start, with adds flowing, and beside each other", () => {
  it(`${ROUNDS} rounds of notices failed and replay, clients issue and list, shards list and audit at once: each one answers`, async () => {
    for (let round = 1; round <= ROUNDS; round += 1) {
      // A failed notice on each shard: the round's replay must reach both.
      const seeded = [await storeFailed("s1", round), await storeFailed("s2", round)];
      const addsBefore = [...adds.statuses.values()].reduce((a, b) => a + b, 0);
      const [failed, replay, issued, clients, shards, audit] = await Promise.all([
        command("notices", "failed", "--json"),
        command("notices", "replay"),
        command("clients", "issue", "--chain", "c1", "--json"),
        command("clients", "list", "--json"),
        command("shards", "list", "--json"),
        command("audit", "chain", "c1", "--json"),
      ]);
      expect(answer(failed)).toBeInstanceOf(Array);
      expect(replay.status, shown(replay)).toBe(0);
      for (const [index, eventId] of seeded.entries()) expect(replay.stdout).toContain(`${eventId}\tshard=${LOCAL_SHARDS[index]}`);
      expect(answer(issued)).toMatchObject({ client_id: expect.any(String), client_secret: expect.any(String) });
      expect(answer(clients)).toBeInstanceOf(Array);
      const rows = answer(shards) as { name: string; receipts: unknown; bytes: unknown }[];
      expect(rows.map((row) => row.name)).toEqual([...LOCAL_SHARDS]);
      for (const row of rows) expect([typeof row.receipts, typeof row.bytes]).toEqual(["number", "number"]);
      expect(answer(audit)).toBeInstanceOf(Array);
      // The adds went on while the commands ran.
      expect([...adds.statuses.values()].reduce((a, b) => a + b, 0)).toBeGreaterThan(addsBefore);
    }
    expect(adds.statuses.get(200)).toBeGreaterThan(0);
  }, 600_000);
});
