/**
 * Token signing key sets (contract §2): the JSON Web Key Set held by the TOKEN_KEYS secret.
 * Parsed by the API Worker, made and extended by `npm run keys`.
 */
import { base64url } from "jose";

/** A setting that is missing or malformed; the message names the setting, never its value. */
export class ConfigError extends Error {
  override name = "ConfigError";
}

/** One HS256 signing key from `TOKEN_KEYS`. */
export interface TokenKey {
  kid: string;
  /** base64url key bytes, at least 256 bits. */
  k: string;
}

const MIN_KEY_BYTES = 32;

/** Parses a JSON Web Key Set of `oct` HS256 keys (contract §2). */
export function parseTokenKeys(raw: string | undefined): TokenKey[] {
  if (!raw) throw new ConfigError("TOKEN_KEYS is not set");
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch {
    throw new ConfigError("TOKEN_KEYS is not JSON");
  }
  const keys = (parsed as { keys?: unknown })?.keys;
  if (!Array.isArray(keys) || keys.length === 0) {
    throw new ConfigError("TOKEN_KEYS has no keys array");
  }
  const seen = new Set<string>();
  return keys.map((key: Record<string, unknown>, i) => {
    const { kty, kid, alg, k } = key ?? {};
    if (kty !== "oct" || alg !== "HS256" || typeof kid !== "string" || kid === "" || typeof k !== "string") {
      throw new ConfigError(`TOKEN_KEYS key ${i} must be {kty:"oct", alg:"HS256", kid, k}`);
    }
    if (seen.has(kid)) throw new ConfigError(`TOKEN_KEYS repeats kid at key ${i}`);
    seen.add(kid);
    if (base64urlByteLength(k) < MIN_KEY_BYTES) {
      throw new ConfigError(`TOKEN_KEYS key ${i} is shorter than 256 bits`);
    }
    return { kid, k };
  });
}

function base64urlByteLength(text: string): number {
  if (!/^[A-Za-z0-9_-]*$/.test(text)) return 0;
  return Math.floor((text.length * 6) / 8);
}


/** A JSON Web Key for HS256 with 256 random bits and a dated kid. */
export function newTokenKey(): { kty: "oct"; kid: string; alg: "HS256"; k: string } {
  const date = new Date().toISOString().slice(0, 10).replaceAll("-", "");
  const suffix = base64url.encode(crypto.getRandomValues(new Uint8Array(3)));
  return { kty: "oct", kid: `k${date}-${suffix}`, alg: "HS256", k: base64url.encode(crypto.getRandomValues(new Uint8Array(32))) };
}
