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

/** An object as read before a rewrite: its ETag and text, or absent. */
export interface HeldObject {
  key: string;
  existing: { etag: string } | null;
  text: string;
}

/** Reads the object `key` for {@link writeObject}. */
export async function readObject(bucket: ArchiveBucket, key: string): Promise<HeldObject> {
  const existing = await bucket.get(key);
  return { key, existing: existing && { etag: existing.etag }, text: existing ? await existing.text() : "" };
}

/**
 * Puts the object as read (`held`) with `change` applied to its receipts, and returns it as read
 * back. Writes nothing when the text would not change (a re-run of a move): the read is then the
 * proof that the copy is there; nor when an absent object would be created empty (a purge of
 * lines that were never written). An object left without receipts is kept empty, not deleted:
 * R2's delete takes no condition, so it could remove a line another writer had just added.
 *
 * @throws when another writer changed the object since it was read, or it does not read back as written.
 */
export async function writeObject(
  bucket: ArchiveBucket,
  { key, existing, text: heldText }: HeldObject,
  change: (held: ArchivedReceipt[]) => ArchivedReceipt[],
): Promise<WrittenObject> {
  const text = archiveText(change(archivedReceipts(heldText)));
  const written = { object_key: key, receipts: archivedReceipts(text).length, bytes: byteLength(text), created: existing === null };
  if (existing ? text === heldText : text === "") return { ...written, created: false };
  const put = await bucket.put(key, text, { onlyIf: existing ? { etagMatches: existing.etag } : { etagDoesNotMatch: "*" } });
  if (!put) throw new Error(`archive object ${key} changed while it was being rewritten`);
  const readBack = await bucket.get(key);
  if (!readBack || (await readBack.text()) !== text) throw new Error(`archive object ${key} does not read back as written`);
  return written;
}

/** Reads the object `key` and writes it with `change` applied: {@link readObject}, then {@link writeObject}. */
export async function rewriteObject(
  bucket: ArchiveBucket,
  key: string,
  change: (held: ArchivedReceipt[]) => ArchivedReceipt[],
): Promise<WrittenObject> {
  return writeObject(bucket, await readObject(bucket, key), change);
}

/** The length of an archived receipt's line, newline included. */
export function lineBytes(receipt: ArchivedReceipt): number {
  return byteLength(archiveText([receipt]));
}

function byteLength(text: string): number {
  return new TextEncoder().encode(text).byteLength;
}
