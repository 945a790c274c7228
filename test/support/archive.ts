/**
 * Archived receipts as the move leaves them (src/storage/archive/layout.ts): a receipt's row
 * copied into its object in R2, beside the lines already there, and removed from its shard in the
 * batch that records its owner.
 */
import { env } from "cloudflare:workers";
import { archiveObjectKey, type ArchivedReceipt } from "../../src/storage/archive/layout.ts";
import { readReceipts, rewriteObject } from "../../src/storage/archive/objects.ts";
import { recordOwners } from "../../src/storage/archive/owners.ts";
import { shardOfId } from "../../src/storage/shards.ts";
import { runBatch, statement } from "../../src/storage/statement.ts";
import { SHARDS, dbOf, storedReceipt } from "./shards.ts";
import { testUserKey } from "./user-keys.ts";

/** Moves a stored receipt to the archive; returns its object's key. */
export async function archiveReceipt(receiptId: string): Promise<string> {
  const db = dbOf(receiptId);
  const stored = (await storedReceipt(receiptId)) as ArchivedReceipt | null;
  if (!stored) throw new Error(`no receipt ${receiptId} to archive`);
  const { chain_id, client_id, app_user_id, created_at, body } = stored;
  const row: ArchivedReceipt = { receipt_id: receiptId, chain_id, client_id, app_user_id, created_at, body };
  const key = archiveObjectKey(await testUserKey(row.app_user_id), row.chain_id, receiptId, shardOfId(SHARDS, receiptId)!.name);
  // A delete's purge (after its answer) may rewrite the object meanwhile: the conditional put then
  // fails, and, as the move's step would be, the write is run again.
  for (let attempt = 1; ; attempt += 1) {
    try {
      await rewriteObject(env.ARCHIVE, key, (held) => [...held, row]);
      break;
    } catch (error) {
      if (attempt === 3) throw error;
    }
  }
  await runBatch(db, [recordOwners(statement("SELECT ?1", receiptId)), statement("DELETE FROM receipts WHERE receipt_id = ?1", receiptId)]);
  return key;
}

/** The receipts an object holds; none when it does not exist. */
export async function archivedLines(key: string): Promise<ArchivedReceipt[]> {
  return (await readReceipts(env.ARCHIVE, key)) ?? [];
}

/** A receipt's tombstone on its shard, or null. */
export async function tombstoneOf(receiptId: string): Promise<Record<string, unknown> | null> {
  return dbOf(receiptId).prepare("SELECT * FROM archive_tombstones WHERE receipt_id = ?").bind(receiptId).first();
}

/** A receipt's archived owner row on its shard, or null. */
export async function archivedOwnerOf(receiptId: string): Promise<Record<string, unknown> | null> {
  return dbOf(receiptId).prepare("SELECT * FROM archived_owners WHERE receipt_id = ?").bind(receiptId).first();
}

/** The keys of every archived object under `prefix`. */
export async function archivedKeys(prefix: string): Promise<string[]> {
  const keys: string[] = [];
  let cursor: string | undefined;
  do {
    const page = await env.ARCHIVE.list({ prefix, ...(cursor ? { cursor } : {}) });
    keys.push(...page.objects.map(({ key }) => key));
    cursor = page.truncated ? page.cursor : undefined;
  } while (cursor);
  return keys;
}
