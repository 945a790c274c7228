/**
 * Both Workers' settings (their wrangler vars and secrets): what each is, one parser that checks
 * them once per isolate, and one error that names a bad setting, so that it fails with its name
 * rather than deep inside a request. Runs on Node too: `npm run keys` checks a key set with
 * {@link parseTokenKeys}.
 *
 * AUDIT_HASH_KEY, a secret of the API Worker, keys the hash that stands for an erased app user in
 * the audit trail and names the app user in erasure fences: the erasure's Workflow writes fences
 * and add checks them, so the Worker reads it (a missing key fails every add with its name).
 */
import { parseAuditHashKey } from "./audit-hash-key.ts";
import type { TokenKey } from "./token-keys.ts";

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
  /** How long a client may take to send add's body before it is refused, in seconds. */
  BODY_DEADLINE_SECONDS: string;
  /** How long audit records are kept, in days, before the cron job purges them. */
  AUDIT_RETENTION_DAYS: string;
  /** How long an app user's export file, and the record of each app-user job, is kept, in days. */
  EXPORT_KEPT_DAYS: string;
  /** How old a receipt is, in days, when the archive moves it from its shard to R2; 0 moves every receipt. */
  ARCHIVE_AFTER_DAYS: string;
  /** Base64url of 32 or more random bytes: the key of the hash that stands for an app user in fences and the audit trail. */
  AUDIT_HASH_KEY: string;
  /** How long after its change an event that never reached the queue waits for the cron re-send, in seconds. */
  NOTICE_RESEND_GRACE_SECONDS: string;
  /** How long after its queue send an undelivered event counts as lost and is sent again, in seconds. */
  NOTICE_LOST_AFTER_SECONDS: string;
  /**
   * How many days back the event feed reaches (docs/api.md#event-feed); 14 when unset. At most
   * as long as delivered events are kept ({@link DELIVERED_RETENTION_MS}), or the feed would
   * promise events the purge has taken.
   */
  EVENT_FEED_DAYS?: string;
  /**
   * How many of its newest seconds the event feed holds back (docs/api.md#event-feed, "The
   * tail"); 10 when unset. At least {@link MIN_FEED_SETTLE_SECONDS}: more than any event may take
   * to commit ({@link EVENT_COMMIT_SECONDS}), and a second for the clocks of the Workers and the
   * databases to differ.
   */
  FEED_SETTLE_SECONDS?: string;
  /**
   * How many shards one part of an erasure (a child instance of its Workflow) erases; 500 when
   * unset. At most {@link MAX_ERASURE_PART_SHARDS}: a part runs a step a shard, plus a step for
   * each further page, within the steps one instance may run.
   */
  ERASURE_PART_SHARDS?: string;
  /** How long one isolate reuses the status it computed, in seconds (docs/operations.md "Status"). */
  STATUS_CACHE_SECONDS: string;
  /** Unhealthy when the oldest undelivered event is older than this, in seconds. */
  STATUS_DELIVERY_LATE_SECONDS: string;
  /** Unhealthy when at least this many failed notices wait for a replay. */
  STATUS_FAILED_NOTICES: string;
  /** Unhealthy when the push service has been marked down for this long, in seconds. */
  STATUS_ENDPOINT_DOWN_SECONDS: string;
  /** Unhealthy when an open shard passes this share of SHARD_FILL_BYTES (0.8: 80 %). */
  STATUS_FILL_SHARE: string;
  /** Unhealthy when a shard's oldest receipt fell due for the archive (ARCHIVE_AFTER_DAYS after its month) this many hours ago. */
  STATUS_ARCHIVE_BEHIND_HOURS: string;
}

/** The notifier Worker's wrangler vars and secrets, as the runtime hands them over. */
export interface NotifierSettings {
  /** Where notices are POSTed; unset in plain local development, where they are logged. */
  APP_PUSH_URL?: string;
  /** Standard Webhooks signing secret, `whsec_<base64 key>`; several, separated by white space, while the app side rotates. */
  APP_PUSH_SECRET?: string;
  /** How long one push may take, in seconds; a delivery claims its notice for three times that. */
  PUSH_TIMEOUT_SECONDS: string;
  /** The delay before the second attempt of a notice, in seconds; it doubles for each one after. */
  RETRY_FIRST_DELAY_SECONDS: string;
  /** The longest delay between two attempts of a notice, in seconds. */
  RETRY_MAX_DELAY_SECONDS: string;
  /** How long a failing event is retried, from its first failed attempt, before it is dead-lettered, in hours. */
  NOTICE_RETRY_HOURS: string;
  /** While the push service is down, the least time between two probes of it, in seconds. */
  PUSH_PROBE_SECONDS: string;
}

/** A setting that is missing or malformed; the message names the setting, never its value. */
export class ConfigError extends Error {
  override name = "ConfigError";
}

/** The API Worker's settings, checked. */
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
  /** Receipts created longer ago than this move to the archive. */
  archiveAfterMs: number;
  /** AUDIT_HASH_KEY's bytes. */
  auditHashKey: Uint8Array;
  noticeResendGraceMs: number;
  noticeLostAfterMs: number;
  /** How far back the event feed reaches. */
  eventFeedMs: number;
  /** How much of its newest time the event feed holds back, so that every event it skips is committed. */
  feedSettleMs: number;
  /** How many shards one part of an erasure erases. */
  erasurePartShards: number;
  /** How long an export's file and a job's record are kept after the job was started. */
  exportKeptMs: number;
}

/** How long a push may take, how long a delivery holds its notice, and when a failed one is tried again. */
export interface DeliveryTiming {
  pushTimeoutMs: number;
  /**
   * Longer than a push may take, so two copies of a message never push at once; short, so a copy
   * whose Worker died frees the notice soon.
   */
  claimMs: number;
  /** The backoff and how long it goes on (src/notifier/retry.ts). */
  retry: { firstDelaySeconds: number; maxDelaySeconds: number; windowMs: number };
  /** While the push service is down, one probe per this long across every isolate. */
  probeMs: number;
}

/** How notices leave the notifier. */
export type PushTarget =
  | { kind: "log" }
  | { kind: "push"; url: string; keys: CryptoKey[] }
  /** A URL is set but a setting is unusable: notices wait (retried) until an operator fixes it. */
  | { kind: "misconfigured"; problem: string };

/**
 * An isolate's parsed settings, kept while the runtime hands over the same bindings object (one
 * per deployment), so each is parsed once; the isolate's state object holds one per Worker.
 */
export interface SettingsMemory<Settings, Parsed> {
  parsed?: { env: Settings; value: Parsed };
}

/**
 * The API Worker's settings, parsed on first use in an isolate. A bad setting throws
 * `ConfigError` naming it, which the error handler turns into a 500 with the cause in the log.
 */
export function apiConfig(env: ApiSettings, memory: SettingsMemory<ApiSettings, ApiConfig> = {}): ApiConfig {
  return remembered(env, memory, (settings) => ({
    tokenKeys: parseTokenKeys(settings.TOKEN_KEYS),
    issuer: requiredText(settings, "TOKEN_ISSUER"),
    audience: requiredText(settings, "TOKEN_AUDIENCE"),
    docsUrl: requiredText(settings, "DOCS_URL"),
    supportContact: requiredText(settings, "SUPPORT_CONTACT"),
    clientCacheMs: seconds(settings, "CLIENT_CACHE_SECONDS") * 1000,
    ...healthConfig(settings),
    shardStatesMs: seconds(settings, "SHARD_STATES_SECONDS") * 1000,
    bodyDeadlineMs: positiveNumber(settings, "BODY_DEADLINE_SECONDS") * 1000,
    auditRetentionMs: positiveNumber(settings, "AUDIT_RETENTION_DAYS") * DAY_MS,
    auditHashKey: hashKey(settings),
    noticeResendGraceMs: seconds(settings, "NOTICE_RESEND_GRACE_SECONDS") * 1000,
    noticeLostAfterMs: positiveNumber(settings, "NOTICE_LOST_AFTER_SECONDS") * 1000,
    eventFeedMs: eventFeedDays(settings) * DAY_MS,
    feedSettleMs: feedSettleSeconds(settings) * 1000,
    erasurePartShards: erasurePartShards(settings),
    exportKeptMs: positiveNumber(settings, "EXPORT_KEPT_DAYS") * DAY_MS,
  }));
}

/**
 * The settings the status reads beside its thresholds: part of {@link apiConfig}, and all that
 * `npm run status` needs of a local state's settings, which hold no secret it could parse.
 */
export function healthConfig(settings: Pick<ApiSettings, "SHARD_FILL_BYTES" | "ARCHIVE_AFTER_DAYS">): Pick<ApiConfig, "shardFillBytes" | "archiveAfterMs"> {
  return { shardFillBytes: positiveNumber(settings, "SHARD_FILL_BYTES"), archiveAfterMs: archiveAfterMs(settings) };
}

/** When the status turns unhealthy, and how long it is reused (docs/operations.md "Status"). */
export interface StatusThresholds {
  cacheMs: number;
  deliveryLateMs: number;
  failedNotices: number;
  endpointDownMs: number;
  fillShare: number;
  archiveBehindMs: number;
}

/** The status settings, checked; a bad one throws `ConfigError` naming it. */
export function statusThresholds(
  env: Pick<ApiSettings, "STATUS_CACHE_SECONDS" | "STATUS_DELIVERY_LATE_SECONDS" | "STATUS_FAILED_NOTICES" | "STATUS_ENDPOINT_DOWN_SECONDS" | "STATUS_FILL_SHARE" | "STATUS_ARCHIVE_BEHIND_HOURS">,
): StatusThresholds {
  const fillShare = positiveNumber(env, "STATUS_FILL_SHARE");
  if (fillShare > 1) throw new ConfigError("STATUS_FILL_SHARE must be a share from 0 to 1");
  return {
    cacheMs: seconds(env, "STATUS_CACHE_SECONDS") * 1000,
    deliveryLateMs: positiveNumber(env, "STATUS_DELIVERY_LATE_SECONDS") * 1000,
    failedNotices: positiveNumber(env, "STATUS_FAILED_NOTICES"),
    endpointDownMs: positiveNumber(env, "STATUS_ENDPOINT_DOWN_SECONDS") * 1000,
    fillShare,
    archiveBehindMs: positiveNumber(env, "STATUS_ARCHIVE_BEHIND_HOURS") * HOUR_MS,
  };
}

/**
 * Delivered events are kept 14 days, the longest retention a queue allows: until then a stray
 * copy can still arrive and must be recognised as delivered. The event feed reaches no further.
 */
export const DELIVERED_RETENTION_MS = 14 * 24 * 60 * 60 * 1000;

const DEFAULT_EVENT_FEED_DAYS = "14";

// An event created within the feed's window was delivered after it was created, so it is purged
// no sooner than the retention after its creation: a window within the retention is complete.
function eventFeedDays(settings: ApiSettings): number {
  const days = positiveNumber({ EVENT_FEED_DAYS: settings.EVENT_FEED_DAYS ?? DEFAULT_EVENT_FEED_DAYS }, "EVENT_FEED_DAYS");
  if (days * DAY_MS > DELIVERED_RETENTION_MS) {
    throw new ConfigError(`EVENT_FEED_DAYS must be at most ${DELIVERED_RETENTION_MS / DAY_MS}, how long delivered events are kept`);
  }
  return days;
}

/**
 * Every event commits within this many seconds of its event_id's time, or not at all: migration
 * 0018's trigger, which holds the same figure, aborts the transaction of one that would commit
 * later (docs/api.md#event-feed, "The tail").
 */
export const EVENT_COMMIT_SECONDS = 5;

/** The least hold-back of the event feed: the commit bound, and a second for clocks that differ. */
export const MIN_FEED_SETTLE_SECONDS = EVENT_COMMIT_SECONDS + 1;

/** The event feed's hold-back when FEED_SETTLE_SECONDS is unset. */
export const DEFAULT_FEED_SETTLE_SECONDS = 10;

function feedSettleSeconds(settings: ApiSettings): number {
  const value = Number(settings.FEED_SETTLE_SECONDS ?? DEFAULT_FEED_SETTLE_SECONDS);
  if (!Number.isFinite(value) || value < MIN_FEED_SETTLE_SECONDS) {
    throw new ConfigError(`FEED_SETTLE_SECONDS must be at least ${MIN_FEED_SETTLE_SECONDS}, more than an event may take to commit`);
  }
  return value;
}

/**
 * The most shards one part of an erasure may take: Workflows allow 1,024 steps an instance
 * (docs/scale.md §6), and a part takes one a shard and one a further page of an app user's
 * receipts, so about half the steps stay free for those pages.
 */
export const MAX_ERASURE_PART_SHARDS = 500;

function erasurePartShards(settings: ApiSettings): number {
  const text = settings.ERASURE_PART_SHARDS ?? String(MAX_ERASURE_PART_SHARDS);
  const value = Number(text);
  if (!Number.isInteger(value) || value < 1 || value > MAX_ERASURE_PART_SHARDS) {
    throw new ConfigError(`ERASURE_PART_SHARDS must be a whole number from 1 to ${MAX_ERASURE_PART_SHARDS}`);
  }
  return value;
}

/** The notifier's delivery timing (src/notifier/wrangler.jsonc `vars`), parsed on first use in an isolate. */
export function deliveryTiming(
  env: NotifierSettings,
  memory: SettingsMemory<NotifierSettings, DeliveryTiming> = {},
): DeliveryTiming {
  return remembered(env, memory, (settings) => {
    const pushTimeoutMs = positiveSeconds(settings, "PUSH_TIMEOUT_SECONDS") * 1000;
    return {
      pushTimeoutMs,
      claimMs: pushTimeoutMs * 3,
      retry: {
        firstDelaySeconds: positiveSeconds(settings, "RETRY_FIRST_DELAY_SECONDS"),
        maxDelaySeconds: positiveSeconds(settings, "RETRY_MAX_DELAY_SECONDS"),
        windowMs: positiveNumber(settings, "NOTICE_RETRY_HOURS") * HOUR_MS,
      },
      probeMs: positiveSeconds(settings, "PUSH_PROBE_SECONDS") * 1000,
    };
  });
}

/**
 * Where the notifier sends notices (docs/api.md#deletion-notices): a push URL with the signing
 * keys, or the log when no URL is set (plain local development). Unlike the other settings, a bad
 * push setting does not throw: notices wait, retried, until an operator fixes it. The keys are
 * imported once per isolate, again only when the settings change.
 */
export function pushTarget(
  env: NotifierSettings,
  memory: SettingsMemory<Pick<NotifierSettings, "APP_PUSH_URL" | "APP_PUSH_SECRET">, Promise<PushTarget>> = {},
): Promise<PushTarget> {
  const { APP_PUSH_URL, APP_PUSH_SECRET } = env;
  const parsed = memory.parsed;
  if (parsed && parsed.env.APP_PUSH_URL === APP_PUSH_URL && parsed.env.APP_PUSH_SECRET === APP_PUSH_SECRET) return parsed.value;
  const value = readPushTarget(env);
  memory.parsed = { env: { APP_PUSH_URL, APP_PUSH_SECRET }, value };
  return value;
}

const MIN_KEY_BYTES = 32;

/**
 * ARCHIVE_AFTER_DAYS in milliseconds: how old every receipt of a month must be before the archive
 * moves the month (src/storage/archive/layout.ts `archiveCutoff`). Also read by `npm run archive
 * -- status`, which counts the receipts due by that cutoff still in D1.
 */
export function archiveAfterMs(settings: Pick<ApiSettings, "ARCHIVE_AFTER_DAYS">): number {
  const value = Number(requiredText(settings, "ARCHIVE_AFTER_DAYS"));
  if (!Number.isFinite(value) || value < 0) throw new ConfigError("ARCHIVE_AFTER_DAYS must be a number of days");
  return value * DAY_MS;
}

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

function remembered<Settings, Parsed>(
  env: Settings,
  memory: SettingsMemory<Settings, Parsed>,
  parse: (env: Settings) => Parsed,
): Parsed {
  if (memory.parsed?.env !== env) memory.parsed = { env, value: parse(env) };
  return memory.parsed.value;
}

const HOUR_MS = 60 * 60 * 1000;
const DAY_MS = 24 * HOUR_MS;

function hashKey(env: ApiSettings): Uint8Array {
  try {
    return parseAuditHashKey(requiredText(env, "AUDIT_HASH_KEY"));
  } catch (error) {
    throw error instanceof ConfigError ? error : new ConfigError((error as Error).message);
  }
}

type SettingName = keyof ApiSettings | keyof NotifierSettings;

function requiredText<S>(env: S, name: keyof S & SettingName): string {
  const value = env[name];
  if (typeof value !== "string" || value.trim() === "") throw new ConfigError(`${name} is not set`);
  return value;
}

function positiveNumber<S>(env: S, name: keyof S & SettingName): number {
  const value = Number(requiredText(env, name));
  if (!Number.isFinite(value) || value <= 0) throw new ConfigError(`${name} must be a positive number`);
  return value;
}

function seconds<S>(env: S, name: keyof S & SettingName): number {
  const value = Number(requiredText(env, name));
  if (!Number.isFinite(value) || value < 0) throw new ConfigError(`${name} must be a number of seconds`);
  return value;
}

function positiveSeconds<S>(env: S, name: keyof S & SettingName): number {
  const text = env[name];
  const value = Number(text);
  if (!text || !Number.isFinite(value) || value <= 0) throw new ConfigError(`${name} must be a positive number of seconds`);
  return value;
}

function base64urlByteLength(text: string): number {
  if (!/^[A-Za-z0-9_-]*$/.test(text)) return 0;
  return Math.floor((text.length * 6) / 8);
}

const SECRET_PREFIX = "whsec_";

async function readPushTarget(env: NotifierSettings): Promise<PushTarget> {
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
