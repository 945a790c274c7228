/**
 * Client records, read from KV (docs/api.md#login). Operators write them with `npm run clients`; the
 * Worker only reads.
 */
import { clientKey, type ClientRecord } from "../../shared/types.ts";

// KV's own edge cache is kept at its minimum, so that with the isolate cache below a disabled
// client is refused within about a minute of the operator's write (docs/api.md says so).
const KV_CACHE_TTL_SECONDS = 30;

const isolateCache = new Map<string, { record: ClientRecord | null; until: number }>();

/**
 * Reads a client record straight from KV. Login uses this: a rotated or disabled secret must
 * stop working as soon as KV shows the change.
 */
export async function readClientRecord(kv: KVNamespace, clientId: string): Promise<ClientRecord | null> {
  return kv.get<ClientRecord>(clientKey(clientId), { type: "json", cacheTtl: KV_CACHE_TTL_SECONDS });
}

/**
 * Reads a client record, reusing one this isolate read less than `maxAgeMs` ago. Token-bearing
 * routes use this: tills call them thousands of times a minute, and a bounded staleness is the
 * documented price of revocation.
 */
export async function cachedClientRecord(
  kv: KVNamespace,
  clientId: string,
  maxAgeMs: number,
): Promise<ClientRecord | null> {
  const now = Date.now();
  const hit = isolateCache.get(clientId);
  if (hit && hit.until > now) return hit.record;
  const record = await readClientRecord(kv, clientId);
  if (maxAgeMs > 0) {
    if (isolateCache.size >= MAX_CACHED_CLIENTS) isolateCache.clear();
    isolateCache.set(clientId, { record, until: now + maxAgeMs });
  }
  return record;
}

// Bounds the memory an attacker can make an isolate spend on unknown client_ids.
const MAX_CACHED_CLIENTS = 10_000;
