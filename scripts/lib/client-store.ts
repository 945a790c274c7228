/**
 * Where `npm run clients` keeps client records: the CLIENTS KV namespace of the local state,
 * opened in-process (scripts/lib/local-state.ts), or the deployed one through `wrangler kv`.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { clientKey, type ClientRecord } from "../../src/shared/types.ts";
import { localState, type LocalState } from "./local-state.ts";
import { localConfigPaths } from "./shards.ts";
import { targetFlags, wrangler, type Target } from "./wrangler.ts";

/** The client records of one target, by client_id. */
export interface ClientStore {
  read(clientId: string): Promise<ClientRecord | null>;
  /** Every record, in the order of their keys. */
  readAll(): Promise<ClientRecord[]>;
  /** `retryLocked: false`: a write whose timing decides a race is not made again (see `Locking`). */
  write(record: ClientRecord, options?: { retryLocked?: boolean }): Promise<void>;
}

// KV's bulk read takes at most 100 keys a call.
const BULK_GET_LIMIT = 100;

/** The target's CLIENTS namespace: the local state's in-process, the deployment's through wrangler. */
export function clientStore(target: Target): ClientStore {
  return target.remote ? wranglerClientStore(target) : localClientStore(localState(target, localConfigPaths().api));
}

/** The CLIENTS namespace of a local state opened in this process. */
export function localClientStore(state: LocalState): ClientStore {
  const read = async (key: string) => {
    const text = await state.kv("CLIENTS", (namespace) => namespace.get(key, "text"));
    return text === null ? null : (JSON.parse(text) as ClientRecord);
  };
  return {
    read: (clientId) => read(clientKey(clientId)),
    async readAll() {
      const keys: string[] = [];
      let cursor: string | undefined;
      do {
        const page = await state.kv("CLIENTS", (namespace) => namespace.list({ prefix: clientKey(""), ...(cursor && { cursor }) }));
        keys.push(...page.keys.map(({ name }) => name));
        cursor = page.list_complete ? undefined : page.cursor;
      } while (cursor);
      return (await Promise.all(keys.map(read))).filter((record) => record !== null);
    },
    async write(record, options = {}) {
      await state.kv("CLIENTS", (namespace) => namespace.put(clientKey(record.client_id), JSON.stringify(record)), options);
    },
  };
}

/** The target's CLIENTS namespace through wrangler, one wrangler run a call: the deployment's. */
function wranglerClientStore(target: Target): ClientStore {
  return {
    async read(clientId) {
      const flags = ["--binding", "CLIENTS", "--text", ...targetFlags(target)];
      const text = wrangler(["kv", "key", "get", clientKey(clientId), ...flags]).trim();
      // wrangler prints "Value not found" for a missing key rather than failing.
      if (text === "" || text === "Value not found") return null;
      return JSON.parse(text) as ClientRecord;
    },
    async readAll() {
      const keys = JSON.parse(
        wrangler(["kv", "key", "list", "--binding", "CLIENTS", "--prefix", clientKey(""), ...targetFlags(target)]),
      ) as { name: string }[];
      return bulkRead(target, keys.map(({ name }) => name));
    },
    async write(record, options = {}) {
      wrangler(
        ["kv", "key", "put", clientKey(record.client_id), JSON.stringify(record), "--binding", "CLIENTS", ...targetFlags(target)],
        options,
      );
    },
  };
}

function bulkRead(target: Target, keys: string[]): ClientRecord[] {
  const records: ClientRecord[] = [];
  const dir = mkdtempSync(path.join(tmpdir(), "receipts-clients-"));
  try {
    for (let start = 0; start < keys.length; start += BULK_GET_LIMIT) {
      const file = path.join(dir, "keys.json");
      writeFileSync(file, JSON.stringify(keys.slice(start, start + BULK_GET_LIMIT)));
      const values = JSON.parse(
        wrangler(["kv", "bulk", "get", file, "--binding", "CLIENTS", ...targetFlags(target)]),
      ) as Record<string, { value: string | null }>;
      for (const { value } of Object.values(values)) if (value) records.push(JSON.parse(value) as ClientRecord);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  return records;
}
