/**
 * The API Worker's settings (wrangler vars and secrets), parsed and checked once per isolate so
 * that a bad one fails with its name rather than deep inside a request. Runs on Node too:
 * `npm run keys` checks a key set with {@link parseTokenKeys}.
 */
import type { TokenKey } from "../shared/token-keys.ts";

/** The API Worker's wrangler vars and secrets, as the runtime hands them over. */
export interface ApiSettings {
  /** JSON Web Key Set of HS256 keys; the first key signs, every key verifies. */
  TOKEN_KEYS: string;
  TOKEN_ISSUER: string;
  TOKEN_AUDIENCE: string;
  DOCS_URL: string;
  SUPPORT_CONTACT: string;
  /** How long one isolate may reuse a client record read from KV, in seconds. */
  CLIENT_CACHE_SECONDS: string;
  /** Size in bytes past which a shard closes itself while another open shard has room. */
  SHARD_FILL_BYTES: string;
  /** How long one isolate may reuse the shard states read from KV, in seconds (at most 60). */
  SHARD_STATES_SECONDS: string;
  /** How long add waits for a body to arrive in full, in seconds. */
  BODY_DEADLINE_SECONDS: string;
  /** How long audit records are kept, in days, before the cron job purges them. */
  AUDIT_RETENTION_DAYS: string;
  /** How long after its change an event that never reached the queue waits for the cron re-send, in seconds. */
  NOTICE_RESEND_GRACE_SECONDS: string;
  /** How long after its queue send an undelivered event counts as lost and is sent again, in seconds. */
  NOTICE_LOST_AFTER_SECONDS: string;
}

/** A setting that is missing or malformed; the message names the setting, never its value. */
export class ConfigError extends Error {
  override name = "ConfigError";
}


/** The API Worker's settings, checked once per isolate. */
export interface ApiConfig {
  /** Signing order: the first key signs, every key verifies. */
  tokenKeys: TokenKey[];
  issuer: string;
  audience: string;
  docsUrl: string;
  supportContact: string;
  clientCacheMs: number;
  shardFillBytes: number;
  shardStatesMs: number;
  bodyDeadlineMs: number;
  auditRetentionMs: number;
  noticeResendGraceMs: number;
  noticeLostAfterMs: number;
}

let cached: { env: ApiSettings; config: ApiConfig } | undefined;

/**
 * Returns the parsed settings, parsing them on first use in an isolate. A bad setting throws
 * `ConfigError` naming it, which the error handler turns into a 500 with the cause in the log.
 */
export function apiConfig(env: ApiSettings): ApiConfig {
  if (cached?.env !== env) cached = { env, config: parseApiConfig(env) };
  return cached.config;
}

/** Parses and checks every setting of the API Worker. */
export function parseApiConfig(env: ApiSettings): ApiConfig {
  return {
    tokenKeys: parseTokenKeys(env.TOKEN_KEYS),
    issuer: requiredText(env, "TOKEN_ISSUER"),
    audience: requiredText(env, "TOKEN_AUDIENCE"),
    docsUrl: requiredText(env, "DOCS_URL"),
    supportContact: requiredText(env, "SUPPORT_CONTACT"),
    clientCacheMs: seconds(env, "CLIENT_CACHE_SECONDS") * 1000,
    shardFillBytes: positiveNumber(env, "SHARD_FILL_BYTES"),
    shardStatesMs: seconds(env, "SHARD_STATES_SECONDS") * 1000,
    bodyDeadlineMs: positiveNumber(env, "BODY_DEADLINE_SECONDS") * 1000,
    auditRetentionMs: positiveNumber(env, "AUDIT_RETENTION_DAYS") * DAY_MS,
    noticeResendGraceMs: seconds(env, "NOTICE_RESEND_GRACE_SECONDS") * 1000,
    noticeLostAfterMs: positiveNumber(env, "NOTICE_LOST_AFTER_SECONDS") * 1000,
  };
}

const DAY_MS = 24 * 60 * 60 * 1000;

function requiredText(env: ApiSettings, name: keyof ApiSettings): string {
  const value = env[name];
  if (typeof value !== "string" || value.trim() === "") throw new ConfigError(`${name} is not set`);
  return value;
}

function positiveNumber(env: ApiSettings, name: keyof ApiSettings): number {
  const value = Number(requiredText(env, name));
  if (!Number.isFinite(value) || value <= 0) throw new ConfigError(`${name} must be a positive number`);
  return value;
}

function seconds(env: ApiSettings, name: keyof ApiSettings): number {
  const value = Number(requiredText(env, name));
  if (!Number.isFinite(value) || value < 0) throw new ConfigError(`${name} must be a number of seconds`);
  return value;
}

const MIN_KEY_BYTES = 32;

/** Parses a JSON Web Key Set of `oct` HS256 keys (docs/api.md#login). */
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
