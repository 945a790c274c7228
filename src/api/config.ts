import type { ApiEnv } from "../shared/env.ts";
import { ConfigError, parseTokenKeys, type TokenKey } from "../shared/token-keys.ts";

export { ConfigError };

/** The API Worker's settings, checked once per isolate. */
export interface ApiConfig {
  /** Signing order: the first key signs, every key verifies. */
  tokenKeys: TokenKey[];
  issuer: string;
  audience: string;
  docsUrl: string;
  supportContact: string;
  clientCacheMs: number;
}


let cached: { env: ApiEnv; config: ApiConfig } | undefined;

/**
 * Returns the parsed settings, parsing them on first use in an isolate. A bad setting throws
 * `ConfigError` naming it, which the error handler turns into a 500 with the cause in the log.
 */
export function apiConfig(env: ApiEnv): ApiConfig {
  if (cached?.env !== env) cached = { env, config: parseApiConfig(env) };
  return cached.config;
}

/** Parses and checks every setting of the API Worker. */
export function parseApiConfig(env: ApiEnv): ApiConfig {
  return {
    tokenKeys: parseTokenKeys(env.TOKEN_KEYS),
    issuer: requiredText(env, "TOKEN_ISSUER"),
    audience: requiredText(env, "TOKEN_AUDIENCE"),
    docsUrl: requiredText(env, "DOCS_URL"),
    supportContact: requiredText(env, "SUPPORT_CONTACT"),
    clientCacheMs: seconds(env, "CLIENT_CACHE_SECONDS") * 1000,
  };
}

function requiredText(env: ApiEnv, name: keyof ApiEnv): string {
  const value = env[name];
  if (typeof value !== "string" || value.trim() === "") throw new ConfigError(`${name} is not set`);
  return value;
}

function seconds(env: ApiEnv, name: keyof ApiEnv): number {
  const value = Number(requiredText(env, name));
  if (!Number.isFinite(value) || value < 0) throw new ConfigError(`${name} must be a number of seconds`);
  return value;
}
