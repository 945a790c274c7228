/**
 * The one compression of what the service stores: `deflate-raw`, what CompressionStream makes in
 * a Worker, with no zlib header or checksum (D1 and R2 keep their own). A receipt's texts in D1
 * (./stored-body.ts) and an archive object in R2 (./archive/objects.ts) go through it. The same
 * streams exist in workerd and in Node, so the soak, the scripts and the scans read what the
 * Workers wrote. This file stays free of Workers types.
 */

/** `bytes`, deflated. */
export function deflateRaw(bytes: Uint8Array): Promise<Uint8Array> {
  return piped(bytes, new CompressionStream("deflate-raw"));
}

/** Bytes that {@link deflateRaw} made, inflated. */
export function inflateRaw(bytes: Uint8Array): Promise<Uint8Array> {
  return piped(bytes, new DecompressionStream("deflate-raw"));
}

async function piped(bytes: Uint8Array, through: CompressionStream | DecompressionStream): Promise<Uint8Array> {
  const stream = new Blob([bytes as Uint8Array<ArrayBuffer>]).stream().pipeThrough(through);
  return new Uint8Array(await new Response(stream).arrayBuffer());
}
