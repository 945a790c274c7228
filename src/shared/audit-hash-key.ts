/**
 * AUDIT_HASH_KEY (docs/api.md#erasure): the key of the hash that stands for an erased app user in
 * the audit trail, the base64url text of at least 32 random bytes. Made by `npm run keys -- audit`
 * and `npm start`; read by the erasure (src/storage/erasure.ts).
 */
import { base64url } from "jose";

const HASH_KEY_BYTES = 32;

/** A fresh AUDIT_HASH_KEY. */
export function newAuditHashKey(): string {
  return base64url.encode(crypto.getRandomValues(new Uint8Array(HASH_KEY_BYTES)));
}

/**
 * AUDIT_HASH_KEY's bytes.
 *
 * @throws RangeError for anything but the base64url text of 32 or more bytes; the message never
 * quotes the key.
 */
export function parseAuditHashKey(text: string): Uint8Array {
  const trimmed = text.trim();
  let bytes: Uint8Array | undefined;
  try {
    bytes = /^[A-Za-z0-9_-]+$/.test(trimmed) ? base64url.decode(trimmed) : undefined;
  } catch {
    // Not base64url (a length no encoding gives): refused below.
  }
  if (!bytes || bytes.length < HASH_KEY_BYTES) {
    throw new RangeError(`AUDIT_HASH_KEY is not the base64url text of ${HASH_KEY_BYTES} or more bytes`);
  }
  return bytes;
}
