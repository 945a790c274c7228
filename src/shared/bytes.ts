/** Byte helpers both Workers share. */

/** `chunks` end to end, as one array of `length` bytes (their total, which the caller counted as they came). */
export function joinedBytes(chunks: readonly Uint8Array[], length: number): Uint8Array {
  const bytes = new Uint8Array(length);
  let offset = 0;
  for (const chunk of chunks) {
    bytes.set(chunk, offset);
    offset += chunk.byteLength;
  }
  return bytes;
}
