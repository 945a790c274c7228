/**
 * The one place a presented client secret is compared with a stored hash. Kept alone so that a
 * reviewer can audit it alone.
 */
import { ABSENT_SECRET_HASH, hashClientSecret } from "../../shared/secrets.ts";

/**
 * True when `secret` hashes to `storedHash`, compared in constant time. With no record, pass
 * `undefined`: a dummy hash is compared instead, so an unknown client_id answers in the time a
 * wrong secret does (docs/api.md#login).
 */
export async function secretMatches(secret: string, storedHash: string | undefined): Promise<boolean> {
  const encoder = new TextEncoder();
  const presented = encoder.encode(await hashClientSecret(secret));
  const expected = encoder.encode(storedHash ?? ABSENT_SECRET_HASH);
  // timingSafeEqual needs equal lengths; a malformed record still spends one comparison.
  const comparable = presented.byteLength === expected.byteLength;
  const equal = crypto.subtle.timingSafeEqual(presented, comparable ? expected : presented);
  return equal && comparable && storedHash !== undefined;
}
