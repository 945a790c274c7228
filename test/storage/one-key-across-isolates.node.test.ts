/**
 * docs/api.md#idempotency, docs/storage.md "One key, one receipt": the same client repeating an
 * Idempotency-Key never stores a second receipt, in any isolate, also right after a shard
 * closed, opened or was added. Two isolates of the API Worker (two Workers of one runtime, so no
 * memory in common) share one local state: its D1 shards and KV, as two isolates of one
 * deployment share Cloudflare's, one D1 primary running each shard's batches one at a time. One
 * reads the shard states once and keeps them (an isolate within its minute, or one of the deploy
 * before a shard was added), the other reads them on every request; each key's add goes to both
 * at once. Each isolate once had a runtime of its own, on one SQLite file: their locks failed
 * batches that D1 never fails so, and under load a key's answer was then once found unstored.
 */
import path from "node:path";
import type { Miniflare } from "miniflare";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { applyMigrations, issueClient, type HarnessClient } from "../../harness/miniflare.ts";
import { PATHS } from "../../src/shared/paths.ts";
import { shardStateKey, type ShardState } from "../../src/shared/shard-ids.ts";
import { POS_SCOPE } from "../../src/shared/types.ts";
import { STORED_COLUMNS, storedTexts, type StoredColumns } from "../../src/storage/stored-body.ts";
import { localStoreIds } from "../../scripts/lib/local-state.ts";
import { startApiIsolates } from "../support/api-miniflare.ts";
import { ROOT, freshState } from "../support/run-script.ts";

// The two shards of wrangler.jsonc, keyed as the migrated template keeps them.
const TWO_SHARDS = localStoreIds(path.join(ROOT, "wrangler.jsonc")).d1Databases;
const THREE_SHARDS = { ...TWO_SHARDS, DB_S3: "00000000-0000-4000-8000-000000000033" };
/** Keys raced per case: about half of them have the changed shard first in their order. */
const KEYS = 24;
/** A till sends a keyed add again after a 5xx or no answer. */
const ATTEMPTS = 6;
const DAY_MS = 24 * 60 * 60 * 1000;

const running: Miniflare[] = [];
afterEach(async () => {
  await Promise.all(running.splice(0).map((mf) => mf.dispose()));
});

/** One isolate of the API Worker: its requests, and the stores it binds. */
interface Isolate {
  fetch(path: string, init: RequestInit): Promise<Response>;
  kv(binding: string): ReturnType<Miniflare["getKVNamespace"]>;
  d1(binding: string): Promise<D1>;
}

/**
 * The two isolates on `state`, once their runtime is up: `stale` reads the shard states once and
 * keeps them, `fresh` on every request.
 */
async function isolates(state: string, shards: { stale: Record<string, string>; fresh: Record<string, string> }): Promise<{ stale: Isolate; fresh: Isolate }> {
  const mf = startApiIsolates(state, [
    { shards: shards.stale, settings: { SHARD_STATES_SECONDS: "3600" } },
    { shards: shards.fresh, settings: { SHARD_STATES_SECONDS: "0" } },
  ]);
  running.push(mf);
  await mf.ready;
  const isolate = (name: string): Isolate => ({
    fetch: async (path, init) => (await mf.getWorker(name)).fetch(`http://localhost${path}`, init as never) as unknown as Response,
    kv: (binding) => mf.getKVNamespace(binding, name),
    d1: (binding) => mf.getD1Database(binding, name),
  });
  return { stale: isolate("api-0"), fresh: isolate("api-1") };
}

async function setState(isolate: Isolate, shard: string, state: ShardState["state"], changedAt: number): Promise<void> {
  const record: ShardState = { state, changed_at: new Date(changedAt).toISOString(), by: "operator" };
  await (await isolate.kv("SHARD_STATES")).put(shardStateKey(shard), JSON.stringify(record));
}

async function token(isolate: Isolate, client: HarnessClient): Promise<string> {
  const response = await isolate.fetch(PATHS.login, {
    method: "POST",
    headers: { client_id: client.clientId, client_secret: client.secret, token_type: "Bearer", scope: POS_SCOPE },
  });
  return ((await response.json()) as { data: { access_token: string } }).data.access_token;
}

/** One isolate's answer to a key: the last status and receipt, and every attempt's, for a failure to name. */
interface Answer {
  status: number;
  receiptId?: string;
  attempts: string[];
}

/** Sends one keyed add as a till does: again under the same key after a 5xx, until an answer below 500. */
async function add(isolate: Isolate, client: HarnessClient, bearer: string, key: string): Promise<Answer> {
  const attempts: string[] = [];
  for (let attempt = 1; ; attempt += 1) {
    const response = await isolate.fetch(PATHS.add, {
      method: "POST",
      headers: {
        Authorization: `Bearer ${bearer}`,
        client_id: client.clientId,
        chain_id: client.chainId,
        app_user_id: "au-across",
        "Content-Type": "application/json",
        "Idempotency-Key": key,
      },
      body: JSON.stringify({ purchased_at: "2026-11-22T14:03:00+01:00", currency: "EUR", total: 100, line_items: [{ description: key, quantity: 1, unit_price: 100, total: 100 }] }),
    });
    const body = (await response.json()) as { data?: { receipt_id: string } };
    attempts.push(`${response.status} ${body.data?.receipt_id ?? "-"} at ${new Date().toISOString()}`);
    if (response.status < 500 || attempt === ATTEMPTS) return { status: response.status, receiptId: body.data?.receipt_id, attempts };
  }
}

/** The receipts stored for `key`'s line item, on every shard, and the receipt.created events of each. */
async function storedFor(databases: D1[], clientId: string, key: string): Promise<{ receipts: string[]; created: number }> {
  const receipts: string[] = [];
  let created = 0;
  for (const db of databases) {
    // A receipt's texts are stored deflated (src/storage/stored-body.ts): SQL cannot read into them.
    const rows = await db
      .prepare(`SELECT receipt_id, ${STORED_COLUMNS.join(", ")} FROM receipts WHERE client_id = ?1`)
      .bind(clientId)
      .all<{ receipt_id: string } & StoredColumns>();
    for (const row of rows.results) {
      const { body } = await storedTexts(row);
      if ((JSON.parse(body) as { line_items: { description: string }[] }).line_items[0]!.description === key) receipts.push(row.receipt_id);
    }
  }
  for (const db of databases) {
    for (const receiptId of receipts) {
      const events = await db
        .prepare("SELECT count(*) AS n FROM notice_outbox WHERE receipt_id = ?1 AND json_extract(payload, '$.type') = 'receipt.created'")
        .bind(receiptId)
        .first<{ n: number }>();
      created += events!.n;
    }
  }
  return { receipts, created };
}

type D1 = Awaited<ReturnType<Miniflare["getD1Database"]>>;

/**
 * Races each key's add in both isolates once `change` is made (after the stale one read the
 * states), then holds every key to one receipt, one receipt.created and one answer.
 */
async function raceAcross(options: {
  staleShards: Record<string, string>;
  freshShards: Record<string, string>;
  before?: (isolate: Isolate) => Promise<void>;
  change: (isolate: Isolate) => Promise<void>;
}): Promise<void> {
  const { stale, fresh } = await isolates(freshState(), { stale: options.staleShards, fresh: options.freshShards });
  for (const binding of Object.keys(options.freshShards).filter((name) => !(name in TWO_SHARDS))) {
    await applyMigrations(await fresh.d1(binding));
  }
  const client = await issueClient(await stale.kv("CLIENTS"), `pos-across-${Date.now()}`, "chain-across");
  await options.before?.(stale);
  const [staleToken, freshToken] = [await token(stale, client), await token(fresh, client)];
  // The stale isolate reads the states now, and keeps them through the change.
  expect((await add(stale, client, staleToken, "warm-up")).status).toBe(200);
  await options.change(fresh);

  const keys = Array.from({ length: KEYS }, (_, i) => `key-${i}-${crypto.randomUUID()}`);
  const answers = await Promise.all(keys.map((key) => Promise.all([add(stale, client, staleToken, key), add(fresh, client, freshToken, key)])));
  const databases = await Promise.all(Object.keys(options.freshShards).map((binding) => fresh.d1(binding)));
  for (const [i, key] of keys.entries()) {
    const [a, b] = answers[i]!;
    // Each call's attempts, so that a failure says which interleaving it met.
    const history = `${key}: stale isolate ${a.attempts.join(", ")}; fresh isolate ${b.attempts.join(", ")}`;
    expect([a.status, b.status], history).toEqual([200, 200]);
    expect(a.receiptId, history).toBe(b.receiptId);
    const stored = await storedFor(databases, client.clientId, key);
    expect(stored, history).toEqual({ receipts: [a.receiptId], created: 1 });
  }
}

describe("docs/api.md#idempotency one Idempotency-Key, one receipt, across isolates", { timeout: 240_000 }, () => {
  afterAll(async () => {
    await Promise.all(running.splice(0).map((mf) => mf.dispose()));
  });

  it("across a shard close: one isolate still sees it open, the other closed", async () => {
    await raceAcross({
      staleShards: TWO_SHARDS,
      freshShards: TWO_SHARDS,
      change: (isolate) => setState(isolate, "s1", "closed", Date.now()),
    });
  });

  it("across a shard open: one isolate still sees it closed for days, the other open", async () => {
    await raceAcross({
      staleShards: TWO_SHARDS,
      freshShards: TWO_SHARDS,
      before: (isolate) => setState(isolate, "s1", "closed", Date.now() - 2 * DAY_MS),
      change: (isolate) => setState(isolate, "s1", "open", Date.now()),
    });
  });

  it("across a shard add: one isolate of the deploy before it, the other with the new shard just opened", async () => {
    await raceAcross({
      staleShards: TWO_SHARDS,
      freshShards: THREE_SHARDS,
      // `npm run shards -- add` records the new shard closed before any isolate has its binding.
      before: (isolate) => setState(isolate, "s3", "closed", Date.now()),
      change: (isolate) => setState(isolate, "s3", "open", Date.now()),
    });
  });
});
