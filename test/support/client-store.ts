/**
 * A local state's CLIENTS namespace reached through Miniflare, for `npm run clients`'s commands
 * run in-process (test/scripts/clients.test.ts): the same records `wrangler kv --persist-to`
 * reads and writes, without a wrangler start per call.
 */
import type { Miniflare } from "miniflare";
import type { ClientStore } from "../../scripts/lib/client-store.ts";
import { clientKey, type ClientRecord } from "../../src/shared/types.ts";

/** The CLIENTS namespace of the Worker that `mf` runs on the local state, as a client store. */
export function miniflareClientStore(mf: Miniflare): ClientStore {
  const namespace = () => mf.getKVNamespace("CLIENTS");
  const read = async (key: string) => {
    const text = await (await namespace()).get(key, "text");
    return text === null ? null : (JSON.parse(text) as ClientRecord);
  };
  return {
    read: (clientId) => read(clientKey(clientId)),
    async readAll() {
      const { keys } = await (await namespace()).list({ prefix: clientKey("") });
      return (await Promise.all(keys.map(({ name }) => read(name)))).filter((record) => record !== null);
    },
    async write(record) {
      await (await namespace()).put(clientKey(record.client_id), JSON.stringify(record));
    },
  };
}
