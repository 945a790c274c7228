/**
 * Every read and write of an archive object (src/storage/archive/layout.ts). A writer (the move,
 * the purge of deleted receipts, the rename) reads an object, changes its receipts, puts it back
 * only if no one wrote it meanwhile, and reads it back, so two of them racing on one key cannot
 * lose each other's change: the later put fails its condition and its step runs again. Every
 * reader (an export, an erasure, the soak's and the scripts' readers) gets an object's receipts
 * from {@link readObject} too, so that none needs to know how an object is stored.
 *
 * An object is stored deflated (`deflate-raw`, docs/storage.md#archive): its lines are JSON text
 * with long runs in common, so an object takes about a quarter of its text's bytes
 * (docs/scale.md §10). One written before is plain NDJSON text and still reads. The two are
 * told apart by the object's custom metadata ({@link ENCODING}), which every get returns: not by
 * its first byte, since a raw deflate stream may begin with `{` as a line does; nor by its HTTP
 * content encoding, which would tell an HTTP client reading the object to inflate it as zlib's
 * `deflate`, which a raw stream is not. This file stays free of Workers types: R2's binding and
 * Miniflare's both fit {@link ArchiveBucket}.
 */
import { deflateRaw, inflateRaw } from "../deflate.ts";
import { archivedReceipts, archiveText, type ArchivedReceipt } from "./layout.ts";

/** An object as the move wrote it and read it back. */
export interface WrittenObject {
  object_key: string;
  receipts: number;
  bytes: number;
  /** The object did not exist before. */
  created: boolean;
}

/** What the archive needs of an R2 bucket. */
export interface ArchiveBucket {
  get(key: string): Promise<StoredObject | null>;
  put(
    key: string,
    value: Uint8Array,
    options: { onlyIf: { etagMatches: string } | { etagDoesNotMatch: string }; customMetadata: Record<string, string> },
  ): Promise<{ etag: string } | null>;
}

/** An object as R2's get returns it, as far as the archive reads it. */
export interface StoredObject {
  etag: string;
  customMetadata?: Record<string, string>;
  arrayBuffer(): Promise<ArrayBuffer>;
}

/** The custom metadata of an object stored deflated: absent from one written before, in plain text. */
export const ENCODING = { encoding: "deflate-raw" } as const;

/** An object as read before a rewrite: its ETag and text, or absent. */
export interface HeldObject {
  key: string;
  existing: { etag: string } | null;
  text: string;
}

/** Reads the object `key`: its text ("" when absent), as {@link writeObject} takes it. */
export async function readObject(bucket: Pick<ArchiveBucket, "get">, key: string): Promise<HeldObject> {
  const existing = await bucket.get(key);
  return { key, existing: existing && { etag: existing.etag }, text: existing ? await objectText(existing) : "" };
}

/** The receipts of the object `key`, or null when there is no such object. */
export async function readReceipts(bucket: Pick<ArchiveBucket, "get">, key: string): Promise<ArchivedReceipt[] | null> {
  const { existing, text } = await readObject(bucket, key);
  return existing && archivedReceipts(text);
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
  const onlyIf = existing ? { etagMatches: existing.etag } : { etagDoesNotMatch: "*" };
  if (!(await putObject(bucket, key, text, onlyIf))) throw new Error(`archive object ${key} changed while it was being rewritten`);
  // Read back as every reader reads it: inflated, so the check covers the encoding too.
  const readBack = await readObject(bucket, key);
  if (!readBack.existing || readBack.text !== text) throw new Error(`archive object ${key} does not read back as written`);
  return written;
}

/**
 * Puts `text` as the object `key`, deflated, on the condition `onlyIf` on its ETag; returns
 * whether the condition held and the object was written. The one put of an archive object.
 */
export async function putObject(
  bucket: Pick<ArchiveBucket, "put">,
  key: string,
  text: string,
  onlyIf: { etagMatches: string } | { etagDoesNotMatch: string },
): Promise<boolean> {
  return (await bucket.put(key, await deflated(text), { onlyIf, customMetadata: { ...ENCODING } })) !== null;
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

// The text of an object as got, inflated when it was stored deflated.
async function objectText(object: StoredObject): Promise<string> {
  const bytes = await object.arrayBuffer();
  const stored = object.customMetadata?.encoding === ENCODING.encoding ? await inflateRaw(new Uint8Array(bytes)) : bytes;
  return new TextDecoder().decode(stored);
}

// `text` as an object stores it: deflated, raw (no zlib header or checksum: R2 keeps its own).
function deflated(text: string): Promise<Uint8Array> {
  return deflateRaw(new TextEncoder().encode(text));
}
