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
 * key or a cursor: either would name an app user in the Workflow's stored state.
 *
 * The rename is the only code that calls R2 with a key of the first layout: such a key names its
 * app user, and every R2 call records its key or prefix in the Worker's trace, where no erasure
 * reaches. So delete and erasure never look in the first layout: delete needs no object to
 * answer, and an erasure refuses to start while any object of the first layout is left
 * ({@link checkFirstLayoutRenamed}); the status names that as a reason. This file stays free of
 * Workers types.
 */
import type { JobShard, StepRunner } from "../steps.ts";
import { LEGACY_PREFIX, archiveObjectKey, shardOfObjectKey } from "./layout.ts";
import { readReceipts, rewriteObject, type ArchiveBucket } from "./objects.ts";
import { retargetTombstones } from "./tombstones.ts";

/** What the rename needs of the archive's bucket. */
export interface LegacyBucket extends ArchiveBucket {
  list(options: { prefix: string; limit: number }): Promise<{ objects: { key: string }[]; truncated: boolean }>;
  delete(keys: string | string[]): Promise<void>;
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
): Promise<number> {
  let renamed = 0;
  for (let page = 0; page < LEGACY_MAX_PAGES; page += 1) {
    const done = await steps(`rename legacy page ${page}`, () => renamePage(bucket, shards, userKey));
    renamed += done.renamed;
    if (!done.more) break;
  }
  return renamed;
}

async function renamePage(
  bucket: LegacyBucket,
  shards: readonly JobShard[],
  userKey: (appUserId: string) => Promise<string>,
): Promise<{ renamed: number; more: boolean }> {
  const listing = await bucket.list({ prefix: LEGACY_PREFIX, limit: LEGACY_PAGE });
  let renamed = 0;
  for (const { key } of listing.objects) {
    const lines = (await readReceipts(bucket, key)) ?? [];
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

/** Why an erasure does not start: the first layout's objects are out of its reach. */
export const FIRST_LAYOUT_LEFT =
  "The archive still holds objects of its first layout, named by app_user_id, which an erasure cannot reach without naming the app user: run `npm run archive -- run` until `npm run status` no longer reports first_layout_left, then erase again.";

/** Whether any object of the first layout is left: one list of its whole prefix, which names nobody. */
export async function firstLayoutLeft(bucket: Pick<LegacyBucket, "list">): Promise<boolean> {
  return (await bucket.list({ prefix: LEGACY_PREFIX, limit: 1 })).objects.length > 0;
}

/**
 * An erasure's first step, `check the archive's layout`: throws {@link FIRST_LAYOUT_LEFT} (the
 * error `refusal` makes) while any object of the first layout is left, before anything is erased.
 */
export async function checkFirstLayoutRenamed(
  bucket: Pick<LegacyBucket, "list">,
  steps: StepRunner,
  refusal: (message: string) => Error = (message) => new Error(message),
): Promise<void> {
  if (await steps("check the archive's layout", () => firstLayoutLeft(bucket))) throw refusal(FIRST_LAYOUT_LEFT);
}
