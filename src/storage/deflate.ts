/**
 * The one compression of what the service stores: `deflate-raw`, what CompressionStream makes in
 * a Worker, with no zlib header or checksum (D1 and R2 keep their own). A receipt's texts in D1
 * (./stored-body.ts) and an archive object in R2 (./archive/objects.ts) go through it. The same
 * streams exist in workerd and in Node, so the soak, the scripts and the scans read what the
 * Workers wrote. This file stays free of Workers types.
 */
import { joinedBytes } from "../shared/bytes.ts";

/** `bytes`, deflated. */
export function deflateRaw(bytes: Uint8Array): Promise<Uint8Array> {
  return piped(bytes, new CompressionStream("deflate-raw"));
}

/** Bytes that {@link deflateRaw} made, inflated. */
export function inflateRaw(bytes: Uint8Array): Promise<Uint8Array> {
  return piped(bytes, new DecompressionStream("deflate-raw"));
}

// Written and read straight through the stream's own writer and reader: a Blob's stream into a
// Response doubled the cost of a 2 KB receipt's deflate (0.23 ms against 0.11 in Node), on add's
// path before its batch.
async function piped(bytes: Uint8Array, through: CompressionStream | DecompressionStream): Promise<Uint8Array> {
  const writer = through.writable.getWriter();
  const written = writer.write(bytes as Uint8Array<ArrayBuffer>).then(() => writer.close());
  // A failure shows in the reads below too; `written` is awaited after them.
  written.catch(() => undefined);
  const reader = through.readable.getReader();
  const chunks: Uint8Array[] = [];
  let length = 0;
  for (let read = await reader.read(); !read.done; read = await reader.read()) {
    chunks.push(read.value);
    length += read.value.byteLength;
  }
  await written;
  return joinedBytes(chunks, length);
}
