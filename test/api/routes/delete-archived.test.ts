/**
 * Delete reaches archived receipts (docs/api.md#delete-archived, docs/storage.md#archive-tombstones):
 * the same headers, the same answers, the same event and audit record, and the archived line gone.
 */
import { createExecutionContext, waitOnExecutionContext } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { createApp } from "../../../src/api/app.ts";
import { PATHS } from "../../../src/shared/paths.ts";
import { BASE, type Answer, type TestClient, call, expectErrorShape, issueClient, loginToken, uniqueId } from "../../support/api.ts";
import { archiveReceipt, archivedLines, archivedOwnerOf, tombstoneOf } from "../../support/archive.ts";
import { type SeededReceipt, auditRows, deleteHeadersFor, outboxRows, seedReceipt } from "../../support/notices.ts";
import { SHARDS, dbOf, idOn } from "../../support/shards.ts";
import { shardOfId } from "../../../src/storage/shards.ts";
import { archiveShard } from "../../../src/storage/archive/move.ts";
import { importAuditHashKey, parseAuditHashKey, pseudonymWith } from "../../../src/shared/audit-hash-key.ts";
import { runBatch, type Statement } from "../../../src/storage/statement.ts";
import { TEST_AUDIT_HASH_KEY } from "../../support/keys.ts";
import { testUserKey } from "../../support/user-keys.ts";
import { writeFence } from "../../../src/storage/fences.ts";
import { archiveObjectKey, archiveText, legacyObjectKey } from "../../../src/storage/archive/layout.ts";
import { firstLayoutLeft, renameLegacyObjects } from "../../../src/storage/archive/legacy.ts";
import { sweepTombstones } from "../../../src/storage/archive/deletion.ts";
import { runAtOnce } from "../../../src/storage/steps.ts";

const HASH_KEY = parseAuditHashKey(TEST_AUDIT_HASH_KEY);

/** A client with a token and two receipts of one app user and chain, archived in one object. */
async function archivedOwner(): Promise<{ client: TestClient; token: string; receipt: SeededReceipt; neighbour: SeededReceipt; key: string }> {
  const client = await issueClient();
  const token = await loginToken(client);
  const receipt = await seedReceipt(client);
  const neighbour = await seedReceipt(client, { app_user_id: receipt.app_user_id, receipt_id: idOn(shardOfId(SHARDS, receipt.receipt_id)) });
  const key = await archiveReceipt(receipt.receipt_id);
  await archiveReceipt(neighbour.receipt_id);
  return { client, token, receipt, neighbour, key };
}

/** R2 calls by method, counted on the way to the bucket. */
function countedArchive(): { bucket: R2Bucket; calls: string[] } {
  const calls: string[] = [];
  const bucket = new Proxy(env.ARCHIVE, {
    get: (target, property) => {
      const value = Reflect.get(target, property, target) as unknown;
      if (typeof value !== "function") return value;
      return (...args: unknown[]) => {
        calls.push(typeof args[0] === "string" ? `${String(property)} ${args[0]}` : String(property));
        return (value as (...a: unknown[]) => unknown).apply(target, args);
      };
    },
  });
  return { bucket, calls };
}

/** Calls a fresh app whose ARCHIVE counts its calls; returns once every waitUntil settled. */
async function deleteCounted(headers: Record<string, string>): Promise<{ answer: Answer; r2: string[] }> {
  const { bucket, calls } = countedArchive();
  const ctx = createExecutionContext();
  const response = await createApp().fetch(new Request(BASE + PATHS.delete, { method: "POST", headers }), { ...env, ARCHIVE: bucket }, ctx);
  const answer: Answer = { status: response.status, headers: response.headers, body: await response.json() };
  await waitOnExecutionContext(ctx);
  return { answer, r2: calls };
}

// The request reference differs per request; the rest of a message is the answer.
function withoutReference(message: string): string {
  return message.replace(/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g, "<ref>");
}

describe("docs/api.md#delete-archived delete of an archived receipt", () => {
  it("answers 200 as for a live receipt, records the same event and audit record and a tombstone, and rewrites the object without the line", async () => {
    const { token, receipt, neighbour, key } = await archivedOwner();
    const { answer, r2 } = await deleteCounted(deleteHeadersFor(token, receipt));
    expect(answer.status).toBe(200);
    expect(answer.body).toEqual({
      message: `Receipt ${receipt.receipt_id} was deleted and the app user notified.`,
      status: "OK",
      status_code: 200,
    });
    const [event] = await outboxRows(receipt.receipt_id);
    const payload = JSON.parse(event!.payload) as Record<string, unknown>;
    expect(payload).toEqual({
      event_id: event!.event_id,
      type: "receipt.deleted",
      occurred_at: expect.any(String),
      receipt_id: receipt.receipt_id,
      app_user_id: receipt.app_user_id,
      chain_id: receipt.chain_id,
      client_id: receipt.client_id,
    });
    const audit = await auditRows(receipt.receipt_id);
    expect(audit).toEqual([
      expect.objectContaining({
        action: "receipt.deleted",
        receipt_id: receipt.receipt_id,
        chain_id: receipt.chain_id,
        client_id: receipt.client_id,
        app_user: receipt.app_user_id,
        at: payload.occurred_at,
      }),
    ]);
    const tombstone = await tombstoneOf(receipt.receipt_id);
    expect(tombstone).toMatchObject({ object_key: key, deleted_at: payload.occurred_at, purged_at: expect.any(String) });
    expect(await archivedOwnerOf(receipt.receipt_id)).toBeNull();
    expect(await archivedOwnerOf(neighbour.receipt_id)).toMatchObject({ app_user_id: neighbour.app_user_id });
    expect((await archivedLines(key)).map(({ receipt_id }) => receipt_id)).toEqual([neighbour.receipt_id]);
    // Measured: the answer needs no R2 call; the purge reads the object and puts it conditionally.
    expect(r2).toEqual([`get ${key}`, `put ${key}`]);
  });

  it("deletes the object once its last line is gone", async () => {
    const { token, receipt, neighbour, key } = await archivedOwner();
    expect((await deleteCounted(deleteHeadersFor(token, receipt))).answer.status).toBe(200);
    const { answer, r2 } = await deleteCounted(deleteHeadersFor(token, neighbour));
    expect(answer.status).toBe(200);
    expect(await env.ARCHIVE.head(key)).toBeNull();
    expect(r2).toEqual([`get ${key}`, `delete ${key}`]);
    expect(await tombstoneOf(neighbour.receipt_id)).toMatchObject({ purged_at: expect.any(String) });
  });

  it("a second delete answers as for a deleted live receipt, without reading R2, and records nothing more", async () => {
    const { token, receipt } = await archivedOwner();
    expect((await deleteCounted(deleteHeadersFor(token, receipt))).answer.status).toBe(200);
    const { answer, r2 } = await deleteCounted(deleteHeadersFor(token, receipt));
    const message = expectErrorShape(answer, 406, "Not Acceptable");
    expect(message).toContain("Header receipt_id: no receipt exists under this ID.");
    expect(r2).toEqual([]);
    expect(await outboxRows(receipt.receipt_id)).toHaveLength(1);
    expect(await auditRows(receipt.receipt_id)).toHaveLength(1);
  });

  it("a live receipt's delete, and a second delete of it, read no R2", async () => {
    const client = await issueClient();
    const token = await loginToken(client);
    const receipt = await seedReceipt(client);
    expect(await deleteCounted(deleteHeadersFor(token, receipt))).toMatchObject({ answer: { status: 200 }, r2: [] });
    expect(await deleteCounted(deleteHeadersFor(token, receipt))).toMatchObject({ answer: { status: 406 }, r2: [] });
  });

  it("racing deletes of one archived receipt: one 200, the rest 406, one event", async () => {
    const { token, receipt } = await archivedOwner();
    const answers = await Promise.all(Array.from({ length: 5 }, () => call(PATHS.delete, { headers: deleteHeadersFor(token, receipt) })));
    expect(answers.map(({ status }) => status).sort()).toEqual([200, 406, 406, 406, 406]);
    expect(await outboxRows(receipt.receipt_id)).toHaveLength(1);
    expect(await auditRows(receipt.receipt_id)).toHaveLength(1);
  });
});

describe("docs/api.md#delete-errors an archived receipt's errors are a live one's", () => {
  type Change = "client_id" | "chain_id" | "app_user_id" | "chain_id and app_user_id" | "all" | "unknown";
  const CHANGES: readonly Change[] = ["client_id", "chain_id", "app_user_id", "chain_id and app_user_id", "all", "unknown"];
  const otherClient = (change: Change) => change === "client_id" || change === "all";
  const otherChain = (change: Change) => change === "chain_id" || change === "chain_id and app_user_id" || change === "all";
  const otherUser = (change: Change) => change === "app_user_id" || change === "chain_id and app_user_id" || change === "all";

  // Every refusal is answered from the shard's owner row (docs/storage.md#archived-owners): no R2 call.
  async function archivedAnswer(headers: Record<string, string>): Promise<Answer> {
    const { answer, r2 } = await deleteCounted(headers);
    expect(r2).toEqual([]);
    return answer;
  }

  // The same mistake against a live receipt and an archived one: the same status and message.
  it.each(CHANGES)("%s differing: the live receipt's answer, and nothing recorded or rewritten", async (change) => {
    const caller = await issueClient();
    const token = await loginToken(caller);
    const other = await issueClient();
    const answers: string[] = [];
    for (const archived of [false, true]) {
      const receipt = await seedReceipt(caller, otherClient(change) ? { client_id: other.clientId } : {});
      const key = archived ? await archiveReceipt(receipt.receipt_id) : undefined;
      const lines = key ? await archivedLines(key) : [];
      const headers = {
        ...deleteHeadersFor(token, receipt),
        client_id: caller.clientId,
        ...(otherChain(change) ? { chain_id: uniqueId("chain-other") } : {}),
        ...(otherUser(change) ? { app_user_id: uniqueId("au-other") } : {}),
        ...(change === "unknown" ? { receipt_id: idOn() } : {}),
      };
      const answer = archived ? await archivedAnswer(headers) : await call(PATHS.delete, { headers });
      answers.push(`${answer.status} ${withoutReference(expectErrorShape(answer, 406, "Not Acceptable"))}`);
      expect(await outboxRows(receipt.receipt_id)).toEqual([]);
      expect(await auditRows(receipt.receipt_id)).toEqual([]);
      if (key) {
        expect(await tombstoneOf(receipt.receipt_id)).toBeNull();
        expect(await archivedLines(key)).toEqual(lines);
        expect(await archivedOwnerOf(receipt.receipt_id)).toEqual({
          receipt_id: receipt.receipt_id,
          client_id: receipt.client_id,
          chain_id: receipt.chain_id,
          app_user_id: receipt.app_user_id,
        });
      }
    }
    expect(answers[1]).toBe(answers[0]);
  });
});

describe("docs/api.md#delete-archived a receipt the move archived", () => {
  it("a delete naming another app user is refused naming app_user_id, as for a live receipt, with no R2 call; its owner's delete succeeds", async () => {
    const client = await issueClient();
    const token = await loginToken(client);
    const receipt = await seedReceipt(client);
    const shard = shardOfId(SHARDS, receipt.receipt_id)!;
    const run = (statements: readonly Statement[]) => runBatch(shard.db, statements).then((results) => results.map(({ results: rows }) => rows));
    await archiveShard({ ...shard, run }, env.ARCHIVE, HASH_KEY, { runId: uniqueId("archive"), archiveAfterMs: 0 });
    expect(await dbOf(receipt.receipt_id).prepare("SELECT 1 FROM receipts WHERE receipt_id = ?").bind(receipt.receipt_id).first()).toBeNull();
    expect(await archivedOwnerOf(receipt.receipt_id)).toMatchObject({ app_user_id: receipt.app_user_id });

    const { answer, r2 } = await deleteCounted({ ...deleteHeadersFor(token, receipt), app_user_id: uniqueId("au-other") });
    expect(expectErrorShape(answer, 406, "Not Acceptable")).toContain("Header app_user_id does not match the receipt's app_user_id.");
    expect(r2).toEqual([]);
    expect((await deleteCounted(deleteHeadersFor(token, receipt))).answer.status).toBe(200);
  });
});

describe("docs/api.md#erasure a delete racing the erasure", () => {
  // The erasure's fence stands on the shard: its page there has run, its archive pass has not.
  async function fenceUser(receipt: SeededReceipt): Promise<void> {
    const instant = new Date(Date.now() + 1000).toISOString();
    await runBatch(dbOf(receipt.receipt_id), [writeFence(await testUserKey(receipt.app_user_id), instant)]);
  }

  it.each(["archived", "live"] as const)("an %s receipt the fence covers is answered as no receipt, and nothing names the app user", async (where) => {
    const client = await issueClient();
    const token = await loginToken(client);
    const receipt = await seedReceipt(client);
    const key = where === "archived" ? await archiveReceipt(receipt.receipt_id) : undefined;
    await fenceUser(receipt);
    const { answer, r2 } = await deleteCounted(deleteHeadersFor(token, receipt));
    expect(expectErrorShape(answer, 406, "Not Acceptable")).toContain("Header receipt_id: no receipt exists under this ID.");
    expect(await outboxRows(receipt.receipt_id)).toEqual([]);
    expect(await auditRows(receipt.receipt_id)).toEqual([]);
    if (key) {
      // The fence answered from D1: no R2 call, nothing written.
      expect(r2).toEqual([]);
      expect(await tombstoneOf(receipt.receipt_id)).toBeNull();
      expect(await archivedOwnerOf(receipt.receipt_id)).toMatchObject({ app_user_id: receipt.app_user_id });
    } else {
      expect(await dbOf(receipt.receipt_id).prepare("SELECT 1 FROM receipts WHERE receipt_id = ?").bind(receipt.receipt_id).first()).not.toBeNull();
    }
  });

  it("a fence of another app user, or one whose instant is before the receipt, stops nothing", async () => {
    const client = await issueClient();
    const token = await loginToken(client);
    const receipt = await seedReceipt(client);
    await archiveReceipt(receipt.receipt_id);
    const db = dbOf(receipt.receipt_id);
    await runBatch(db, [
      writeFence(await testUserKey(`${receipt.app_user_id}-other`), new Date(Date.now() + 1000).toISOString()),
      writeFence(await testUserKey(receipt.app_user_id), "2020-01-01T00:00:00.000Z"),
    ]);
    expect((await deleteCounted(deleteHeadersFor(token, receipt))).answer.status).toBe(200);
  });
});

describe("docs/storage.md#archive objects of the first layout, named by the app_user_id", () => {
  it("a delete of a receipt still in the first layout answers from D1 and never names the old key; the rename brings its line over unpurged and the sweep takes it out", async () => {
    const { token, receipt, neighbour, key } = await archivedOwner();
    // The object as the first layout named it.
    const legacy = legacyObjectKey(receipt.app_user_id, receipt.chain_id, receipt.receipt_id, shardOfId(SHARDS, receipt.receipt_id)!.name);
    // Plain text, as objects were written before the archive deflated them.
    await env.ARCHIVE.put(legacy, archiveText(await archivedLines(key)));
    await env.ARCHIVE.delete(key);
    const { answer, r2 } = await deleteCounted(deleteHeadersFor(token, receipt));
    expect(answer.status).toBe(200);
    // The purge's read of the object the headers name, which the rename has not made yet.
    expect(r2).toEqual([`get ${key}`]);
    expect(await tombstoneOf(receipt.receipt_id)).toMatchObject({ object_key: key, purged_at: expect.any(String) });
    expect((await archivedLines(legacy)).map(({ receipt_id }) => receipt_id).sort()).toEqual([receipt.receipt_id, neighbour.receipt_id].sort());

    const shards = SHARDS.map((shard) => ({ ...shard, run: async (statements: readonly Statement[]) => (await runBatch(shard.db, statements)).map(({ results }) => results) }));
    const hashKey = await importAuditHashKey(HASH_KEY);
    // Every object of the first layout of this test file goes, this one among them.
    while (await firstLayoutLeft(env.ARCHIVE)) {
      await renameLegacyObjects(env.ARCHIVE, shards, (id) => pseudonymWith(hashKey, id), runAtOnce);
    }
    expect(await env.ARCHIVE.head(legacy)).toBeNull();
    expect(await tombstoneOf(receipt.receipt_id)).toMatchObject({ object_key: key, purged_at: null });
    await sweepTombstones(dbOf(receipt.receipt_id), env.ARCHIVE, new Date(Date.now() + 10 * 60_000));
    expect((await archivedLines(key)).map(({ receipt_id }) => receipt_id)).toEqual([neighbour.receipt_id]);
    expect((await deleteCounted(deleteHeadersFor(token, neighbour))).answer.status).toBe(200);
    expect(await env.ARCHIVE.head(key)).toBeNull();
  });

  it("an object key names no app user, and stays within R2's 1,024 bytes for the longest IDs", async () => {
    const longest = "%".repeat(256);
    const key = archiveObjectKey(await testUserKey(longest), longest, idOn(SHARDS[0]), SHARDS[0]!.name);
    expect(key.startsWith(`users/${(await testUserKey(longest)).slice("hmac-sha256:".length)}/`)).toBe(true);
    expect(new TextEncoder().encode(key).byteLength).toBeLessThanOrEqual(1024);
    const { receipt, key: written } = await archivedOwner();
    expect(written).not.toContain(encodeURIComponent(receipt.app_user_id));
  });
});
