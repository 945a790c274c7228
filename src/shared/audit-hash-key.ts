/**
 * AUDIT_HASH_KEY (docs/api.md#erasure): the key of the hash that stands for an erased app user in
 * the audit trail, the base64url text of at least 32 random bytes. Made by `npm run keys -- audit`
 * and `npm start`; read by the API Worker, whose adds and erasures name an app user by that hash in
 * erasure fences (src/storage/fences.ts), and by the erasure (src/storage/erasure.ts).
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

/** AUDIT_HASH_KEY imported for {@link pseudonymWith}; import it once and reuse it. */
export function importAuditHashKey(bytes: Uint8Array): Promise<CryptoKey> {
  return crypto.subtle.importKey("raw", bytes, { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
}

/**
 * The keyed hash that stands for an app_user_id once erased (audit trail) and in erasure fences:
 * the same ID always gives the same value, and without the key no one can test a guess of the ID
 * against it.
 *
 * @example await pseudonymWith(await importAuditHashKey(bytes), "user-42") // "hmac-sha256:9f…"
 */
export async function pseudonymWith(key: CryptoKey, appUserId: string): Promise<string> {
  const mac = new Uint8Array(await crypto.subtle.sign("HMAC", key, new TextEncoder().encode(appUserId)));
  return `hmac-sha256:${Array.from(mac, (byte) => byte.toString(16).padStart(2, "0")).join("")}`;
}
