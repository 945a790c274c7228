/**
 * How client secrets are made and hashed, shared by the API Worker (which compares) and the
 * operator script (which issues). Secrets are 256 random bits, so one SHA-256 is as strong as a
 * slow password hash here and costs the edge nothing.
 */
import { base64url } from "jose";

const PREFIX = "sha256:";

/** A fresh secret: 32 random bytes, base64url (43 characters). */
export function makeClientSecret(): string {
  return base64url.encode(crypto.getRandomValues(new Uint8Array(32)));
}

/** The form stored in the client record: `sha256:<base64url digest>`. */
export async function hashClientSecret(secret: string): Promise<string> {
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(secret));
  return PREFIX + base64url.encode(new Uint8Array(digest));
}

/** Compared when no record exists, so an unknown client_id costs what a wrong secret costs. */
export const ABSENT_SECRET_HASH = `${PREFIX}${"A".repeat(43)}`;
