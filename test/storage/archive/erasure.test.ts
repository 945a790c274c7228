/**
 * docs/api.md#erasure reaches the archive: when an erasure completes no byte of the app user's
 * receipts is left in R2, its count includes their archived receipts, and a resumed or repeated
 * erasure ends the same.
 */
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { parseAuditHashKey } from "../../../src/shared/audit-hash-key.ts";
import { PATHS } from "../../../src/shared/paths.ts";
import { ARCHIVE_ERASURE_OBJECTS, type ErasureBucket } from "../../../src/storage/archive/erasure.ts";
import { LEGACY_PREFIX, archiveObjectKey, archiveText, archiveUserPrefix, legacyObjectKey } from "../../../src/storage/archive/layout.ts";
import { firstLayoutLeft, renameLegacyObjects } from "../../../src/storage/archive/legacy.ts";
import { startErasure } from "../../../src/api/workflows/erasure-workflow.ts";
import { introspectWorkflowInstance } from "cloudflare:test";
import { pseudonymWith, importAuditHashKey } from "../../../src/shared/audit-hash-key.ts";
import { runAtOnce } from "../../../src/storage/steps.ts";
import { eraseAppUser, pseudonym } from "../../../src/storage/erasure.ts";
import type { JobShard } from "../../../src/storage/steps.ts";
import { runBatch } from "../../../src/storage/statement.ts";
import { call, newCaller, uniqueId, type Caller } from "../../support/api.ts";
import { archiveReceipt, archivedKeys, archivedLines } from "../../support/archive.ts";
import { erase } from "../../support/erasure.ts";
import { TEST_AUDIT_HASH_KEY } from "../../support/keys.ts";
import { deleteHeadersFor, seedReceipt } from "../../support/notices.ts";
import { SHARDS, idOn, rowsOnEveryShard } from "../../support/shards.ts";
import { testUserKey } from "../../support/user-keys.ts";

const HASH_KEY = parseAuditHashKey(TEST_AUDIT_HASH_KEY);

/**
 * An app user with a live receipt and archived ones on every shard, two in one object, and one
 * archived receipt deleted (its tombstone unpurged, as a cut-off purge leaves it). Returns how
 * many an erasure erases.
 */
async function archivedUser(caller: Caller, appUserId: string): Promise<number> {
  await seedReceipt(caller.client, { app_user_id: appUserId });
  for (const shard of SHARDS) await archiveReceipt((await seedReceipt(caller.client, { app_user_id: appUserId, receipt_id: idOn(shard) })).receipt_id);
  await archiveReceipt((await seedReceipt(caller.client, { app_user_id: appUserId, receipt_id: idOn(SHARDS[0]) })).receipt_id);
  const deleted = await seedReceipt(caller.client, { app_user_id: appUserId, receipt_id: idOn(SHARDS[1]) });
  const key = await archiveReceipt(deleted.receipt_id);
  const token = caller.headers.Authorization!.slice("Bearer ".length);
  expect((await call(PATHS.delete, { headers: deleteHeadersFor(token, deleted) })).status).toBe(200);
  // The delete's purge ran; put the line back as if it had been cut off before its rewrite.
  const lines = await archivedLines(key);
  await env.ARCHIVE.put(key, archiveText([...lines, { ...deleted, created_at: new Date().toISOString(), body: "{}" }]));
  await SHARDS[1]!.db.prepare("UPDATE archive_tombstones SET purged_at = NULL WHERE receipt_id = ?").bind(deleted.receipt_id).run();
  return 1 + SHARDS.length + 1;
}

/** What is left of the app user in R2, in the tombstones and in the owner rows. */
async function archiveTraces(appUserId: string): Promise<{ objects: number; tombstones: number; owners: number }> {
  const prefix = archiveUserPrefix(await testUserKey(appUserId));
  const tombstones = await rowsOnEveryShard("SELECT 1 FROM archive_tombstones WHERE substr(object_key, 1, length(?1)) = ?1", prefix);
  const owners = await rowsOnEveryShard("SELECT 1 FROM archived_owners WHERE app_user_id = ?", appUserId);
  return { objects: (await archivedKeys(prefix)).length, tombstones: tombstones.length, owners: owners.length };
}

/** The shards as the erasure takes them straight through D1. */
function erasureShards(): JobShard[] {
  return SHARDS.map((shard) => ({ ...shard, run: async (statements) => (await runBatch(shard.db, statements)).map(({ results }) => results) }));
}

/** The archive bucket with its calls counted by method, and every key and prefix they named. */
function countedBucket(calls: Record<string, number>, named: string[] = []): ErasureBucket {
  const count = (method: string, ...names: string[]) => {
    calls[method] = (calls[method] ?? 0) + 1;
    named.push(...names);
  };
  return {
    list: (options) => (count("list", options.prefix), env.ARCHIVE.list(options)),
    get: (key) => (count("get", key), env.ARCHIVE.get(key)),
    delete: (keys) => (count("delete", ...[keys].flat()), env.ARCHIVE.delete(keys)),
    put: (key, value, options) => (count("put", key), env.ARCHIVE.put(key, value, options)),
  };
}

describe("docs/api.md#erasure reaches archived receipts", () => {
  it("the Workflow deletes every object of the app user, counts their archived receipts but not a deleted one, audits them under the pseudonym and removes their tombstones and owner rows; a neighbour keeps everything", async () => {
    const caller = await newCaller();
    const victim = uniqueId("shopper");
    const neighbour = `${victim}0`;
    const erased = await archivedUser(caller, victim);
    await archivedUser(caller, neighbour);
    const neighbourBefore = await archiveTraces(neighbour);
    // Its archived receipts but the deleted one have their owner row until the erasure.
    expect(await archiveTraces(victim)).toMatchObject({ owners: SHARDS.length + 1 });

    const erasure = await erase(victim);
    expect(erasure.receipts_erased).toBe(erased);
    expect(erasure.event.receipts).toBe(erased);
    expect(await archiveTraces(victim)).toEqual({ objects: 0, tombstones: 0, owners: 0 });
    expect(await archiveTraces(neighbour)).toEqual(neighbourBefore);
    // The records of one erasure are its app user's at its instant (its event gets its event_id
    // only when it is recorded, after these records).
    const audited = await rowsOnEveryShard<{ n: number }>(
      "SELECT COUNT(*) AS n FROM audit_log WHERE at = ? AND receipt_id IS NOT NULL AND app_user = ?",
      erasure.event.occurred_at,
      await pseudonym(victim, HASH_KEY),
    );
    expect(audited.reduce((sum, { n }) => sum + n, 0)).toBe(erased);
    expect(await rowsOnEveryShard("SELECT 1 FROM audit_log WHERE app_user = ?", victim)).toEqual([]);
  });

  it("a resumed erasure: a deletion step that fails is retried, and the count is the undisturbed one", async () => {
    const caller = await newCaller();
    const victim = uniqueId("shopper");
    const erased = await archivedUser(caller, victim);
    const erasure = await erase(victim, async (m) => {
      await m.mockStepError({ name: "erase archive page 0" }, new Error("R2 unavailable"), 1);
      await m.mockStepError({ name: "erase archive page 0 objects" }, new Error("R2 unavailable"), 2);
    });
    expect(erasure.receipts_erased).toBe(erased);
    expect(await archiveTraces(victim)).toEqual({ objects: 0, tombstones: 0, owners: 0 });
  });

  it("every step run again after it committed counts each archived receipt once; a re-run erases 0", async () => {
    const caller = await newCaller();
    const victim = uniqueId("shopper");
    const erased = await archivedUser(caller, victim);
    const twice = async <T,>(_name: string, work: () => Promise<T>) => (await work(), work());
    const first = await eraseAppUser(victim, erasureShards(), HASH_KEY, { steps: twice, archive: env.ARCHIVE });
    expect(first.receipts_erased).toBe(erased);
    expect(await archiveTraces(victim)).toEqual({ objects: 0, tombstones: 0, owners: 0 });
    const again = await eraseAppUser(victim, erasureShards(), HASH_KEY, { archive: env.ARCHIVE });
    expect(again.receipts_erased).toBe(0);
  });

  it(`pages of ${ARCHIVE_ERASURE_OBJECTS} objects: R2 calls per object and per receipt erased`, async () => {
    const caller = await newCaller();
    const victim = uniqueId("collector");
    const chains = 2 * ARCHIVE_ERASURE_OBJECTS + 10;
    const perObject = 20;
    const createdAt = new Date().toISOString();
    for (let chain = 0; chain < chains; chain += 1) {
      const shard = SHARDS[chain % SHARDS.length]!;
      const receipts = Array.from({ length: perObject }, () => {
        const receipt_id = idOn(shard);
        return { receipt_id, chain_id: `c${chain}`, client_id: caller.client.clientId, app_user_id: victim, created_at: createdAt, body: "{}" };
      });
      await env.ARCHIVE.put(archiveObjectKey(await testUserKey(victim), `c${chain}`, receipts[0]!.receipt_id, shard.name), archiveText(receipts));
    }
    const calls: Record<string, number> = {};
    const named: string[] = [];
    const erasure = await eraseAppUser(victim, erasureShards(), HASH_KEY, { archive: countedBucket(calls, named) });
    const receipts = chains * perObject;
    expect(erasure.receipts_erased).toBe(receipts);
    expect(await archiveTraces(victim)).toEqual({ objects: 0, tombstones: 0, owners: 0 });
    // A list and a delete per page of objects, a get per object, and one list of the first
    // layout's whole prefix, which finds nothing left to rename.
    const pages = Math.ceil(chains / ARCHIVE_ERASURE_OBJECTS);
    expect(calls).toEqual({ list: pages + 1, get: chains, delete: pages });
    // Every key and prefix a trace records names the app user by their keyed hash alone.
    expect(named.filter((name) => name.includes(victim) || name.includes(encodeURIComponent(victim)))).toEqual([]);
    expect(named).toContain(LEGACY_PREFIX);
    // The figures of docs/storage.md#archive: lists are class A, gets class B, deletes free.
    console.info(
      `archive erasure: ${chains} objects, ${receipts} receipts: ${JSON.stringify(calls)}; per receipt ` +
        `lists ${(calls.list! / receipts).toFixed(4)}, gets ${(calls.get! / receipts).toFixed(4)}, deletes ${(calls.delete! / receipts).toFixed(4)}`,
    );
  }, 60_000);
});

describe("docs/storage.md#archive an erasure never names the app user to R2, so it waits for the first layout's rename", () => {
  it("refuses to start while an object of the first layout is left, erasing nothing; once the archive's run renamed it, it erases the user's objects of both layouts", async () => {
    const caller = await newCaller();
    const victim = uniqueId("shopper");
    const erased = await archivedUser(caller, victim);
    // One more archived receipt, in an object as the first layout named it.
    const old = await seedReceipt(caller.client, { app_user_id: victim, receipt_id: idOn(SHARDS[2]) });
    const key = await archiveReceipt(old.receipt_id);
    const legacy = legacyObjectKey(victim, old.chain_id, old.receipt_id, SHARDS[2]!.name);
    // Plain text, as objects were written before the archive deflated them.
    await env.ARCHIVE.put(legacy, archiveText(await archivedLines(key)));
    await env.ARCHIVE.delete(key);
    const before = await archiveTraces(victim);

    const id = uniqueId("erasure");
    await using instance = await introspectWorkflowInstance(env.ERASURE, id);
    await instance.modify((m) => m.disableRetryDelays());
    await startErasure(env, victim, id);
    // Failed at its first step, which the job's error log line explains (FIRST_LAYOUT_LEFT).
    await instance.waitForStatus("errored");
    expect(await archiveTraces(victim)).toEqual(before);
    expect(await rowsOnEveryShard("SELECT 1 FROM receipts WHERE app_user_id = ?", victim)).toHaveLength(1);

    const hashKey = await importAuditHashKey(HASH_KEY);
    while (await firstLayoutLeft(env.ARCHIVE)) await renameLegacyObjects(env.ARCHIVE, erasureShards(), (user) => pseudonymWith(hashKey, user), runAtOnce);
    expect((await erase(victim)).receipts_erased).toBe(erased + 1);
    expect(await archiveTraces(victim)).toEqual({ objects: 0, tombstones: 0, owners: 0 });
    expect(await env.ARCHIVE.head(legacy)).toBeNull();
  });
});

describe("docs/api.md#erasure what D1 still holds of archived receipts", () => {
  it("a keyed add's record loses the app_user_id and the receipt's delivered created event leaves the outbox, with the archive pass; a neighbour's stay", async () => {
    const caller = await newCaller();
    const victim = uniqueId("shopper");
    const neighbour = `${victim}0`;
    const receipts: Record<string, string> = {};
    for (const user of [victim, neighbour]) {
      const added = await call(PATHS.add, {
        headers: { ...caller.headers, app_user_id: user, "Idempotency-Key": uniqueId("key") },
        body: JSON.stringify({ purchased_at: "2026-11-20T10:00:00+01:00", currency: "SEK", total: 100, line_items: [{ description: "Tea", quantity: 1, unit_price: 100, total: 100 }] }),
      });
      expect(added.status).toBe(200);
      receipts[user] = (added.body as { data: { receipt_id: string } }).data.receipt_id;
      // Its created event went out: the outbox keeps the delivered row for the feed's window.
      await rowsOnEveryShard("UPDATE notice_outbox SET delivered_at = ?2 WHERE receipt_id = ?1", receipts[user]!, new Date().toISOString());
      await archiveReceipt(receipts[user]!);
    }
    const keyRecordsNaming = (user: string) =>
      rowsOnEveryShard("SELECT 1 FROM idempotency_keys WHERE json_extract(response, '$.data.app_user_id') = ?", user);
    const eventsNaming = (user: string) => rowsOnEveryShard("SELECT 1 FROM notice_outbox WHERE json_extract(payload, '$.app_user_id') = ?", user);
    expect(await keyRecordsNaming(victim)).toHaveLength(1);
    expect(await eventsNaming(victim)).toHaveLength(1);

    const erasure = await erase(victim);
    expect(erasure.receipts_erased).toBe(1);
    expect(await keyRecordsNaming(victim)).toEqual([]);
    expect(await rowsOnEveryShard("SELECT 1 FROM idempotency_keys WHERE receipt_id = ? AND erased_at IS NOT NULL", receipts[victim]!)).toHaveLength(1);
    // Only the erasure's own event names the app user, until it is delivered.
    expect(await rowsOnEveryShard("SELECT json_extract(payload, '$.type') AS type FROM notice_outbox WHERE json_extract(payload, '$.app_user_id') = ?", victim)).toEqual([
      { type: "app_user.erased" },
    ]);
    expect(await keyRecordsNaming(neighbour)).toHaveLength(1);
    expect(await eventsNaming(neighbour)).toHaveLength(1);
  });
});
