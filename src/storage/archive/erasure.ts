/**
 * An erasure's pass over the archive (docs/api.md#erasure, docs/storage.md#archive): every object
 * under the app user's prefix is read, its receipts counted and audited as erased on their shard,
 * with every copy D1 still holds of them (their Idempotency-Key answers, their events), then
 * deleted, so that when the erasure completes no byte of the user's receipts is left in R2 or D1.
 * Every R2 call names the user by their keyed hash alone: the erasure started only once no object
 * of the first layout was left (src/storage/archive/legacy.ts). A page of objects takes two steps: the
 * first reads, records and drops the receipts' owner rows (run again, it counts the same lines and
 * adds no record), the second deletes what the first counted, and the tombstones that kept deleted
 * lines out of the count. This file stays free of Workers types: the erasure runs on Node too.
 */
import { auditErasedArchived, countErasedAmong } from "../audit.ts";
import { eraseCopiesOfArchived } from "../erasure-statements.ts";
import type { JobShard, StepRunner } from "../steps.ts";
import { archiveUserPrefix, shardOfObjectKey, type ArchivedReceipt } from "./layout.ts";
import type { LegacyBucket } from "./legacy.ts";
import { readReceipts } from "./objects.ts";
import { eraseTombstonesUnder } from "./tombstones.ts";

/** What the erasure needs of the archive's R2 bucket (the ARCHIVE binding, or Miniflare's). */
export type ErasureBucket = LegacyBucket;

/** The erasure's values the pass needs: the app_user_id, its pseudonym, the erasure's ID and instant. */
export interface ArchiveErasure {
  id: string;
  pseudonym: string;
  event_id: string;
  occurred_at: string;
}

/**
 * Objects per page: a page's first step reads each (one R2 get apiece, far below a step's
 * subrequests) and writes one D1 batch per shard they name; R2's list returns 1,000 at most.
 */
export const ARCHIVE_ERASURE_OBJECTS = 100;

// An app user's tombstones on one shard: their deletes of archived receipts, a handful.
const TOMBSTONES_PER_SHARD = 1000;

/**
 * Erases the app user's archived receipts, a page of objects a pair of steps (`erase archive page
 * <n>`, `erase archive page <n> objects`), until a listing is not cut short. Returns the receipts
 * erased per shard name: those with no tombstone, as D1's pages count those not deleted before.
 */
export async function eraseArchivedReceipts(
  archive: ErasureBucket,
  user: ArchiveErasure,
  shards: readonly JobShard[],
  steps: StepRunner,
): Promise<Record<string, number>> {
  const erased: Record<string, number> = {};
  for (let page = 0; ; page += 1) {
    const found = await steps(`erase archive page ${page}`, () => countPage(archive, user, shards));
    if (found.keys.length > 0) {
      await steps(`erase archive page ${page} objects`, async () => {
        await archive.delete(found.keys);
        // The lines are counted: the tombstones that told deleted ones apart may go now.
        const prefix = archiveUserPrefix(user.pseudonym);
        for (const shard of shards.filter(({ name }) => found.shards.includes(name))) {
          await shard.run([eraseTombstonesUnder(prefix, TOMBSTONES_PER_SHARD, { purgedOnly: false })]);
        }
        return true;
      });
    }
    for (const [shard, count] of Object.entries(found.erased)) erased[shard] = (erased[shard] ?? 0) + count;
    if (!found.more) return erased;
  }
}

/**
 * The first page of objects under the user's prefix (those deleted by earlier pages are gone):
 * their receipts audited as erased on each receipt's shard, and how many were erased there,
 * counted from the audit records so that a run again counts them once; and the shards named.
 */
async function countPage(
  archive: ErasureBucket,
  user: ArchiveErasure,
  shards: readonly JobShard[],
): Promise<{ keys: string[]; erased: Record<string, number>; shards: string[]; more: boolean }> {
  const listing = await archive.list({ prefix: archiveUserPrefix(user.pseudonym), limit: ARCHIVE_ERASURE_OBJECTS });
  const byShard = new Map<string, ArchivedReceipt[]>();
  for (const { key } of listing.objects) {
    const receipts = await readReceipts(archive, key);
    if (!receipts) continue;
    const shard = shardOfObjectKey(key);
    byShard.set(shard, [...(byShard.get(shard) ?? []), ...receipts]);
  }
  const erased: Record<string, number> = {};
  for (const [name, receipts] of byShard) {
    const shard = shards.find((each) => each.name === name);
    // A shard no longer bound keeps no record: its objects still go, and count as erased.
    if (!shard) {
      erased[name] = receipts.length;
      continue;
    }
    const ids = receipts.map(({ receipt_id }) => receipt_id);
    // The owner rows and the copies go by the IDs and clients the lines name: no table has an
    // index by app user to find them, and once audited as erased a receipt's record names no client.
    const rows = await shard.run([
      auditErasedArchived(receipts, user.occurred_at, user.pseudonym, user.event_id),
      countErasedAmong(user.pseudonym, user.event_id, ids),
      ...eraseCopiesOfArchived(receipts, user.occurred_at),
    ]);
    erased[name] = (rows[1]![0] as { n: number }).n;
  }
  return { keys: listing.objects.map(({ key }) => key), erased, shards: [...byShard.keys()], more: listing.truncated };
}

