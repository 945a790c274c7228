/**
 * The soak's operator erasing app users: the erasure of `npm run app-users -- erase`
 * (src/storage/erasure.ts), run on the runtime's shards straight through D1, as wrangler runs it
 * on the local state, never across a restart of the runtime (see FaultDriver.outsideRestarts). A
 * run that fails (a shard's D1 calls failing) is run again, as the operations guide tells an
 * operator to.
 */
import { setTimeout as sleep } from "node:timers/promises";
import { newAuditHashKey, parseAuditHashKey } from "../src/shared/audit-hash-key.ts";
import { eraseAppUser, type ErasureShard } from "../src/storage/erasure.ts";
import { runBatch, type Statement } from "../src/storage/statement.ts";
import type { AppUserErasure, ErasureRecord } from "./load.ts";
import type { SoakRuntime } from "./runtime.ts";

const ATTEMPTS = 10;
const PAUSE_MS = 1000;

/**
 * Erasures on the runtime, `weight` as often as a till's other actions weigh (see load.ts); each
 * attempt runs through `outsideRestarts`.
 */
export function soakErasure(
  runtime: SoakRuntime,
  weight: number,
  outsideRestarts: <T>(work: () => Promise<T>) => Promise<T>,
): AppUserErasure {
  const hashKey = parseAuditHashKey(newAuditHashKey());
  return {
    weight,
    async erase(appUserId) {
      const record: ErasureRecord = { appUserId, start: Date.now(), end: 0, attempts: 0 };
      while (record.attempts < ATTEMPTS) {
        record.attempts += 1;
        try {
          const erasure = await outsideRestarts(async () => eraseAppUser(appUserId, await shardsOf(runtime), hashKey));
          Object.assign(record, { eventId: erasure.event.event_id, receiptsErased: erasure.receipts_erased });
          break;
        } catch {
          await sleep(PAUSE_MS);
        }
      }
      record.end = Date.now();
      return record;
    },
  };
}

async function shardsOf(runtime: SoakRuntime): Promise<ErasureShard[]> {
  return Promise.all(
    runtime.shards.map(async (shard) => {
      const db = await runtime.database(shard.binding);
      return {
        ...shard,
        run: async (statements: readonly Statement[]) =>
          (await runBatch(db, statements)).map(({ results }) => results as unknown[]),
      };
    }),
  );
}

