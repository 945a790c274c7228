/**
 * Writing an archive object (src/storage/archive/layout.ts): read it, change its receipts, put it
 * back only if no one wrote it meanwhile, and read it back. Every writer of an object (the move,
 * the purge of deleted receipts) goes through here, so two of them racing on one key cannot lose
 * each other's change: the later put fails its condition and its step runs again. This file
 * stays free of Workers types: R2's binding and Miniflare's both fit {@link ArchiveBucket}.
 */
import { archivedReceipts, archiveText, type ArchivedReceipt } from "./layout.ts";
import type { WrittenObject } from "./statements.ts";

/** What the archive needs of an R2 bucket. */
export interface ArchiveBucket {
  get(key: string): Promise<{ etag: string; text(): Promise<string> } | null>;
  put(
    key: string,
    value: string,
    options: { onlyIf: { etagMatches: string } | { etagDoesNotMatch: string } },
  ): Promise<{ etag: string } | null>;
}

/**
 * Rewrites the object `key` with `change` applied to its receipts, and returns it as read back.
 * Writes nothing when the text would not change (a re-run of a move): the read is then the proof
 * that the copy is there. An object left without receipts is kept empty, not deleted: R2's delete
 * takes no condition, so it could remove a line another writer had just added.
 *
 * @throws when another writer changed the object first, or it does not read back as written.
 */
export async function rewriteObject(
  bucket: ArchiveBucket,
  key: string,
  change: (held: ArchivedReceipt[]) => ArchivedReceipt[],
): Promise<WrittenObject> {
  const existing = await bucket.get(key);
  const heldText = existing ? await existing.text() : "";
  const receipts = change(archivedReceipts(heldText));
  const text = archiveText(receipts);
  const written = { object_key: key, receipts: archivedReceipts(text).length, bytes: byteLength(text), created: existing === null };
  if (existing && text === heldText) return written;
  const put = await bucket.put(key, text, { onlyIf: existing ? { etagMatches: existing.etag } : { etagDoesNotMatch: "*" } });
  if (!put) throw new Error(`archive object ${key} changed while it was being rewritten`);
  const readBack = await bucket.get(key);
  if (!readBack || (await readBack.text()) !== text) throw new Error(`archive object ${key} does not read back as written`);
  return written;
}

/** The length of an archived receipt's line, newline included. */
export function lineBytes(receipt: ArchivedReceipt): number {
  return byteLength(archiveText([receipt]));
}

function byteLength(text: string): number {
  return new TextEncoder().encode(text).byteLength;
}
