/**
 * Client records, read from KV (docs/api.md#login). Operators write them with `npm run clients`; the
 * Worker only reads.
 */
import { clientKey, type ClientRecord } from "../../shared/types.ts";
import type { ClientCache } from "../context.ts";

// KV's own edge cache is kept at its minimum, so that with the isolate cache below a disabled
// client is refused within about a minute of the operator's write (docs/api.md says so).
const KV_CACHE_TTL_SECONDS = 30;

/**
 * Reads a client record straight from KV. Login uses this: a rotated or disabled secret must
 * stop working as soon as KV shows the change.
 */
export async function readClientRecord(kv: KVNamespace, clientId: string): Promise<ClientRecord | null> {
  return kv.get<ClientRecord>(clientKey(clientId), { type: "json", cacheTtl: KV_CACHE_TTL_SECONDS });
}

/**
 * Reads a client record, reusing one this isolate read less than `maxAgeMs` ago, unless the
 * token presented (issued at `tokenIssuedAt`, seconds) may be newer than that copy. Token-bearing
 * routes use this: tills call them thousands of times a minute, and a bounded staleness is the
 * documented price of revocation. A token newer than the copy came from a login that read the
 * record more recently (after an `enable`, or after the client was issued), so the copy must not
 * overrule it.
 */
export async function cachedClientRecord(
  kv: KVNamespace,
  isolateCache: ClientCache,
  clientId: string,
  maxAgeMs: number,
  tokenIssuedAt: number,
): Promise<ClientRecord | null> {
  const now = Date.now();
  const hit = isolateCache.get(clientId);
  // `iat` is whole seconds: a token of second S may have been issued as late as S + 999 ms, so
  // only a copy read after that is certainly the newer one.
  if (hit && hit.until > now && hit.readAt >= (tokenIssuedAt + 1) * 1000) return hit.record;
  const record = await readClientRecord(kv, clientId);
  if (maxAgeMs > 0) {
    if (isolateCache.size >= MAX_CACHED_CLIENTS) isolateCache.clear();
    isolateCache.set(clientId, { record, readAt: now, until: now + maxAgeMs });
  }
  return record;
}

/**
 * The record's `tokens_valid_after` in milliseconds, 0 for a record that never revoked its
 * tokens. A value that does not parse gives NaN, which no token's epoch passes.
 */
export function tokensValidAfter(record: ClientRecord): number {
  return record.tokens_valid_after === undefined ? 0 : Date.parse(record.tokens_valid_after);
}

// Bounds the memory an attacker can make an isolate spend on unknown client_ids.
const MAX_CACHED_CLIENTS = 10_000;

/** Client records at once in one KV bulk read, at most. */
const BULK_READ_KEYS = 100;

/**
 * How many client records are enabled and how many disabled (the status): a listing of the keys,
 * 1,000 a call, and their records in bulk reads of 100, each key a KV read.
 */
export async function countClients(kv: KVNamespace): Promise<{ active: number; disabled: number }> {
  const keys: string[] = [];
  let cursor: string | undefined;
  do {
    const page = await kv.list({ prefix: clientKey(""), cursor });
    keys.push(...page.keys.map((key) => key.name));
    cursor = page.list_complete ? undefined : page.cursor;
  } while (cursor !== undefined);
  let disabled = 0;
  for (let start = 0; start < keys.length; start += BULK_READ_KEYS) {
    const records = await kv.get<ClientRecord>(keys.slice(start, start + BULK_READ_KEYS), { type: "json" });
    for (const record of records.values()) if (record?.disabled) disabled += 1;
  }
  return { active: keys.length - disabled, disabled };
}
