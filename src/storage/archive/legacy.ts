/**
 * The rename of the archive's first layout (docs/storage.md#archive): objects named by the
 * app_user_id (`receipts/<app_user_id>/…`) go to the key named by the app user's keyed hash
 * (src/storage/archive/layout.ts). Every run of the move begins with it, a page a step, until no
 * such object is left, so a deployment renames its archive by itself, the day after the release.
 *
 * Each object is merged into its new key (a conditional rewrite, src/storage/archive/objects.ts),
 * its shard's tombstones are pointed at the new key, and only then is the old one deleted: a step
 * cut off anywhere leaves every line in the old object, the new one, or both, and the step run
 * again finishes the job. A delete that purged a line from the new object while a rename was
 * still copying it could see the line come back: the rename marks the moved lines' tombstones
 * unpurged, so the cron's sweep takes such a line out again. A step's result is a count, never a
 * key or a cursor: either would name an app user in the Workflow's stored state. This file stays
 * free of Workers types.
 */
import type { JobShard, StepRunner } from "../steps.ts";
import { LEGACY_PREFIX, archiveObjectKey, archivedReceipts, shardOfObjectKey } from "./layout.ts";
import { rewriteObject, type ArchiveBucket } from "./objects.ts";
import { retargetTombstones } from "./tombstones.ts";

/** What the rename needs of the archive's bucket. */
export interface LegacyBucket extends ArchiveBucket {
  list(options: { prefix: string; limit: number }): Promise<{ objects: { key: string }[]; truncated: boolean }>;
  delete(keys: string | string[]): Promise<void>;
}

/** Which objects a rename takes, and how its steps are named and bounded. */
export interface RenameScope {
  /** The objects under this prefix: every one of the first layout, or one app user's. */
  prefix: string;
  /** The steps' name before their number. */
  step: string;
  maxPages: number;
}

/**
 * Objects a step renames: each a get, a rewrite (a get, a put, a get back), a D1 batch and a
 * delete, five R2 calls and one D1 query apiece.
 */
export const LEGACY_PAGE = 50;

/**
 * Pages one run renames at most: beside the move's ARCHIVE_MAX_PAGES and its three other steps,
 * an instance stays below the 1,024 steps Workflows allow. Every shard's daily run renames, so a
 * deployment of 270 shards renames 135,000 objects a day.
 */
export const LEGACY_MAX_PAGES = 10;

/** The move's rename: every object of the first layout, {@link LEGACY_MAX_PAGES} pages a run. */
export const EVERY_LEGACY_OBJECT: RenameScope = { prefix: LEGACY_PREFIX, step: "rename legacy page", maxPages: LEGACY_MAX_PAGES };

/**
 * Renames the objects of the first layout, whatever their shard, a page a step (`rename legacy
 * page <n>`), up to {@link LEGACY_MAX_PAGES} pages: each step lists the first page under the old
 * prefix, which the pages before emptied. Returns how many objects were renamed.
 *
 * @param userKey the app user's pseudonym (src/shared/audit-hash-key.ts `pseudonymWith`).
 */
export async function renameLegacyObjects(
  bucket: LegacyBucket,
  shards: readonly JobShard[],
  userKey: (appUserId: string) => Promise<string>,
  steps: StepRunner,
  scope: RenameScope = EVERY_LEGACY_OBJECT,
): Promise<number> {
  let renamed = 0;
  for (let page = 0; page < scope.maxPages; page += 1) {
    const done = await steps(`${scope.step} ${page}`, () => renamePage(bucket, shards, userKey, scope.prefix));
    renamed += done.renamed;
    if (!done.more) break;
  }
  return renamed;
}

async function renamePage(
  bucket: LegacyBucket,
  shards: readonly JobShard[],
  userKey: (appUserId: string) => Promise<string>,
  prefix: string,
): Promise<{ renamed: number; more: boolean }> {
  const listing = await bucket.list({ prefix, limit: LEGACY_PAGE });
  let renamed = 0;
  for (const { key } of listing.objects) {
    const object = await bucket.get(key);
    const lines = object ? archivedReceipts(await object.text()) : [];
    const first = lines[0];
    if (first) {
      const shardName = shardOfObjectKey(key);
      const target = archiveObjectKey(await userKey(first.app_user_id), first.chain_id, first.receipt_id, shardName);
      await rewriteObject(bucket, target, (held) => [...held, ...lines]);
      // A shard no longer bound keeps no tombstones to point at the new key.
      const shard = shards.find(({ name }) => name === shardName);
      await shard?.run([retargetTombstones(key, target, lines.map(({ receipt_id }) => receipt_id))]);
    }
    await bucket.delete(key);
    renamed += 1;
  }
  return { renamed, more: listing.truncated };
}
