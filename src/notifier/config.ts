/**
 * The notifier's settings, read once per isolate: where it sends notices (a push URL with the
 * signing keys, or the log when no URL is set: plain local development, docs/api.md#deletion-notices),
 * and the timing of its deliveries.
 */
import type { NotifierEnv } from "../shared/env.ts";
import type { RetrySchedule } from "./retry.ts";

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

/** How long a push may take, how long a delivery holds its notice, and when a failed one is tried again. */
export interface DeliveryTiming {
  pushTimeoutMs: number;
  /**
   * Longer than a push may take, so two copies of a message never push at once; short, so a copy
   * whose Worker died frees the notice soon.
   */
  claimMs: number;
  retry: RetrySchedule;
}

/** A timing setting that is missing or not a positive number; the message names it. */
export class NotifierConfigError extends Error {
  override name = "NotifierConfigError";
}

let timing: { env: NotifierEnv; value: DeliveryTiming } | undefined;

/** The delivery timing of these settings (src/notifier/wrangler.toml [vars]), checked once per isolate. */
export function deliveryTiming(env: NotifierEnv): DeliveryTiming {
  if (timing?.env !== env) {
    const pushTimeoutMs = positiveSeconds(env, "PUSH_TIMEOUT_SECONDS") * 1000;
    const value = {
      pushTimeoutMs,
      claimMs: pushTimeoutMs * 3,
      retry: {
        firstDelaySeconds: positiveSeconds(env, "RETRY_FIRST_DELAY_SECONDS"),
        maxDelaySeconds: positiveSeconds(env, "RETRY_MAX_DELAY_SECONDS"),
      },
    };
    timing = { env, value };
  }
  return timing.value;
}

function positiveSeconds(env: NotifierEnv, name: "PUSH_TIMEOUT_SECONDS" | "RETRY_FIRST_DELAY_SECONDS" | "RETRY_MAX_DELAY_SECONDS"): number {
  const value = Number(env[name]);
  if (!env[name] || !Number.isFinite(value) || value <= 0) throw new NotifierConfigError(`${name} must be a positive number of seconds`);
  return value;
}
