/**
 * Token signing keys (docs/api.md#login): the entries of the JSON Web Key Set held by the TOKEN_KEYS
 * secret. Made by `npm run keys` and `npm start`; parsed with the rest of the API Worker's
 * settings in src/shared/config.ts.
 */
import { base64url } from "jose";

/** One HS256 signing key from `TOKEN_KEYS`. */
export interface TokenKey {
  kid: string;
  /** base64url key bytes, at least 256 bits. */
  k: string;
}

/** A JSON Web Key for HS256 with 256 random bits and a dated kid. */
export function newTokenKey(): { kty: "oct"; kid: string; alg: "HS256"; k: string } {
  const date = new Date().toISOString().slice(0, 10).replaceAll("-", "");
  const suffix = base64url.encode(crypto.getRandomValues(new Uint8Array(3)));
  return { kty: "oct", kid: `k${date}-${suffix}`, alg: "HS256", k: base64url.encode(crypto.getRandomValues(new Uint8Array(32))) };
}
