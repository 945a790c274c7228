/**
 * Where the notifier sends notices, read from its settings once per isolate: to a push URL with
 * the signing keys, or to the log when no URL is set (plain local development, docs/api.md#deletion-notices).
 */
import type { NotifierEnv } from "../shared/env.ts";

/** How notices leave the notifier. */
export type PushTarget =
  | { kind: "log" }
  | { kind: "push"; url: string; keys: CryptoKey[] }
  /** A URL is set but a setting is unusable: notices wait (retried) until an operator fixes it. */
  | { kind: "misconfigured"; problem: string };

const SECRET_PREFIX = "whsec_";

let cached: { url?: string; secret?: string; target: Promise<PushTarget> } | undefined;

/** Returns the push target for these settings, importing the keys only when they change. */
export function pushTarget(env: NotifierEnv): Promise<PushTarget> {
  if (cached && cached.url === env.APP_PUSH_URL && cached.secret === env.APP_PUSH_SECRET) return cached.target;
  const target = readTarget(env);
  cached = { url: env.APP_PUSH_URL, secret: env.APP_PUSH_SECRET, target };
  return target;
}

async function readTarget(env: NotifierEnv): Promise<PushTarget> {
  const url = env.APP_PUSH_URL?.trim();
  if (!url) return { kind: "log" };
  if (!/^https?:\/\//i.test(url) || !URL.canParse(url)) {
    return { kind: "misconfigured", problem: "APP_PUSH_URL is not an http(s) URL" };
  }
  // Several secrets, separated by white space, sign side by side while the app side rotates
  // (Standard Webhooks lists one signature per secret).
  const secrets = env.APP_PUSH_SECRET?.trim().split(/\s+/).filter(Boolean) ?? [];
  if (secrets.length === 0) return { kind: "misconfigured", problem: "APP_PUSH_SECRET is not set" };
  const keys: CryptoKey[] = [];
  for (const secret of secrets) {
    const bytes = secret.startsWith(SECRET_PREFIX) ? decodeBase64(secret.slice(SECRET_PREFIX.length)) : undefined;
    if (!bytes || bytes.byteLength < 24) {
      // The message never quotes the secret: logs must not hold it.
      return { kind: "misconfigured", problem: "APP_PUSH_SECRET is not whsec_<base64 of 24 or more bytes>" };
    }
    keys.push(await crypto.subtle.importKey("raw", bytes, { name: "HMAC", hash: "SHA-256" }, false, ["sign"]));
  }
  return { kind: "push", url, keys };
}

function decodeBase64(text: string): Uint8Array | undefined {
  if (!/^[A-Za-z0-9+/]+={0,2}$/.test(text)) return undefined;
  try {
    return Uint8Array.from(atob(text), (char) => char.charCodeAt(0));
  } catch {
    return undefined;
  }
}
