/**
 * docs/storage.md#archive-tombstones: the archived bytes of a deleted receipt are gone within a
 * day. The purge after the answer may be cut off or lose a race; the cron's sweep finishes it.
 */
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { runScheduledJobs } from "../../../src/api/scheduled.ts";
import { newDeletionNotice } from "../../../src/api/events.ts";
import { deleteArchivedReceipt, purgeArchivedLines } from "../../../src/storage/archive/deletion.ts";
import { forgetOwners } from "../../../src/storage/archive/owners.ts";
import { PURGED_TOMBSTONE_KEPT_MS } from "../../../src/storage/archive/tombstones.ts";
import { issueClient } from "../../support/api.ts";
import { archiveReceipt, archivedLines, tombstoneOf } from "../../support/archive.ts";
import { putObject, readObject, readReceipts } from "../../../src/storage/archive/objects.ts";
import { auditRows, outboxRows, seedReceipt } from "../../support/notices.ts";
import { dbOf, SHARDS, idOn } from "../../support/shards.ts";
import { shardOfId } from "../../../src/storage/shards.ts";
import { runBatch } from "../../../src/storage/statement.ts";
import { testUserKey } from "../../support/user-keys.ts";

/** Two archived receipts of one object, and a tombstone of the first as a cut-off delete leaves it. */
async function cutOffDelete(deletedAgoMs: number): Promise<{ gone: string; kept: string; key: string }> {
  const client = await issueClient();
  const first = await seedReceipt(client);
  const second = await seedReceipt(client, { app_user_id: first.app_user_id, receipt_id: idOn(shardOfId(SHARDS, first.receipt_id)) });
  const key = await archiveReceipt(first.receipt_id);
  await archiveReceipt(second.receipt_id);
  await dbOf(first.receipt_id)
    .prepare("INSERT INTO archive_tombstones (receipt_id, object_key, deleted_at) VALUES (?, ?, ?)")
    .bind(first.receipt_id, key, new Date(Date.now() - deletedAgoMs).toISOString())
    .run();
  return { gone: first.receipt_id, kept: second.receipt_id, key };
}

describe("docs/storage.md#archive-tombstones the sweep finishes a purge", () => {
  it("a tombstone whose rewrite was cut off: the next sweep rewrites the object and marks it purged", async () => {
    const { gone, kept, key } = await cutOffDelete(10 * 60 * 1000);
    await runScheduledJobs(env);
    expect((await archivedLines(key)).map(({ receipt_id }) => receipt_id)).toEqual([kept]);
    expect(await tombstoneOf(gone)).toMatchObject({ purged_at: expect.any(String) });
  });

  it("a tombstone of minutes ago is left to its delete's own purge", async () => {
    const { gone, key } = await cutOffDelete(0);
    await runScheduledJobs(env);
    expect(await archivedLines(key)).toHaveLength(2);
    expect(await tombstoneOf(gone)).toMatchObject({ purged_at: null });
  });

  it("a rewrite that loses a race with another writer leaves the object to it and the tombstone to the sweep", async () => {
    const { gone, key } = await cutOffDelete(10 * 60 * 1000);
    // Another writer between this purge's read and its put: the ETag read no longer matches.
    const racing = { ...env.ARCHIVE, get: env.ARCHIVE.get.bind(env.ARCHIVE), delete: env.ARCHIVE.delete.bind(env.ARCHIVE) } as R2Bucket;
    racing.put = async (...args: Parameters<R2Bucket["put"]>) => {
      const current = await readObject(env.ARCHIVE, key);
      // R2's ETag is the bytes' MD5: a blank line more changes it, and no receipt.
      await putObject(env.ARCHIVE, key, `${current.text}\n`, { etagMatches: current.existing!.etag });
      return env.ARCHIVE.put(...args);
    };
    expect(await purgeArchivedLines(dbOf(gone), racing, key, new Date())).toBe(0);
    expect(await archivedLines(key)).toHaveLength(2);
    expect(await tombstoneOf(gone)).toMatchObject({ purged_at: null });
    await runScheduledJobs(env);
    expect(await archivedLines(key)).toHaveLength(1);
  });

  it("an object a move is writing is emptied, not deleted, until the move has finished", async () => {
    const client = await issueClient();
    const only = await seedReceipt(client);
    const key = await archiveReceipt(only.receipt_id);
    const db = dbOf(only.receipt_id);
    const runId = crypto.randomUUID();
    await db
      .prepare("INSERT INTO archive_runs (run_id, cutoff, started_at) VALUES (?, ?, ?)")
      .bind(runId, new Date().toISOString(), new Date().toISOString())
      .run();
    await db.prepare("INSERT INTO archive_tombstones (receipt_id, object_key, deleted_at) VALUES (?, ?, ?)").bind(only.receipt_id, key, new Date().toISOString()).run();
    expect(await purgeArchivedLines(db, env.ARCHIVE, key, new Date())).toBe(0);
    expect(await readReceipts(env.ARCHIVE, key)).toEqual([]);
    await db.prepare("UPDATE archive_runs SET finished_at = ? WHERE run_id = ?").bind(new Date().toISOString(), runId).run();
    expect(await purgeArchivedLines(db, env.ARCHIVE, key, new Date())).toBe(1);
    expect(await env.ARCHIVE.head(key)).toBeNull();
  });

  it("purged tombstones are deleted a week after their purge, unpurged ones never", async () => {
    const { gone, key } = await cutOffDelete(0);
    const db = dbOf(gone);
    const old = new Date(Date.now() - PURGED_TOMBSTONE_KEPT_MS - 60_000).toISOString();
    const unpurged = idOn(shardOfId(SHARDS, gone));
    await db.prepare("UPDATE archive_tombstones SET purged_at = ? WHERE receipt_id = ?").bind(old, gone).run();
    await db.prepare("INSERT INTO archive_tombstones (receipt_id, object_key, deleted_at) VALUES (?, ?, ?)").bind(unpurged, key, old).run();
    await runScheduledJobs(env);
    expect(await tombstoneOf(gone)).toBeNull();
    expect(await tombstoneOf(unpurged)).not.toBeNull();
  });
});

describe("docs/storage.md#archived-owners an archived delete writes only while the owner row stands", () => {
  it("a delete whose owner row an erasure's page removed after its owner check records nothing and answers no receipt", async () => {
    const client = await issueClient();
    const receipt = await seedReceipt(client);
    const key = await archiveReceipt(receipt.receipt_id);
    const shard = shardOfId(SHARDS, receipt.receipt_id)!;
    await runBatch(shard.db, [forgetOwners([receipt.receipt_id])]);
    const notice = newDeletionNotice(receipt, shard);
    expect(await deleteArchivedReceipt(shard, notice, await testUserKey(notice.app_user_id), "ray-erased")).toEqual({ deleted: false, receipt: null });
    expect(await outboxRows(receipt.receipt_id)).toEqual([]);
    expect(await auditRows(receipt.receipt_id)).toEqual([]);
    expect(await tombstoneOf(receipt.receipt_id)).toBeNull();
    expect((await archivedLines(key)).map(({ receipt_id }) => receipt_id)).toEqual([receipt.receipt_id]);
  });
});
