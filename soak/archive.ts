/**
 * The soak's archive: once the load is over and the pipeline has drained, the archive's move runs
 * on every shard (the soak sets ARCHIVE_AFTER_DAYS to 0: every receipt is due) as `npm run archive
 * -- run` starts it, while a share of the API Worker's D1 and R2 calls fail, some of them after
 * reaching the store (a put that landed and lost its answer). The faults last until some R2 calls
 * failed; a step that fails is retried, an instance that gives up is run again, as the operations
 * guide says. The reconciliation then finds every receipt once, in its shard or in the archive.
 */
import { setTimeout as sleep } from "node:timers/promises";
import type { ArchiveRun } from "../src/storage/archive/move.ts";
import { runJob } from "./erasure.ts";
import type { Prng } from "./prng.ts";
import { ARCHIVE_PATH, HEALTHY } from "./protocol.ts";
import type { SoakRuntime } from "./runtime.ts";

/** What the archive's moves did on one shard. */
export interface ArchiveRecord {
  shard: string;
  /** Instances run, the failed ones among them. */
  attempts: number;
  failed: number;
  /** Receipts the completed instances moved. */
  receipts: number;
}

const ATTEMPTS = 10;
// Shares of the API Worker's calls that fail while the archive runs under faults.
const D1_SHARE = 0.2;
const R2_SHARE = 0.3;
/** The faults end once this many R2 calls failed, or after FAULT_LIMIT_MS. */
const R2_FAILURES = 5;
const FAULT_LIMIT_MS = 15_000;
const POLL_MS = 200;

/** Moves every shard's receipts to the archive under faults, then heals them. */
export async function archiveUnderFaults(runtime: SoakRuntime, prng: Prng): Promise<ArchiveRecord[]> {
  const r2Failures = async () => {
    const { api } = await runtime.injected();
    return (api["r2 before"] ?? 0) + (api["r2 after"] ?? 0);
  };
  const before = await r2Failures();
  await runtime.setFaults("api", {
    seed: prng.int(0, 2 ** 31),
    d1: Object.fromEntries(runtime.shards.map(({ binding }) => [binding, D1_SHARE])),
    queue: 0,
    r2: R2_SHARE,
  });
  const healed = (async () => {
    const started = Date.now();
    while ((await r2Failures()) - before < R2_FAILURES && Date.now() - started < FAULT_LIMIT_MS) await sleep(POLL_MS);
    await runtime.setFaults("api", HEALTHY);
  })();
  const records = await Promise.all(runtime.shards.map(({ name }) => archiveShard(runtime, name)));
  await healed;
  return records;
}

// Runs the shard's move until an instance completes: the last one after the faults are healed.
async function archiveShard(runtime: SoakRuntime, shard: string): Promise<ArchiveRecord> {
  const record: ArchiveRecord = { shard, attempts: 0, failed: 0, receipts: 0 };
  while (record.attempts < ATTEMPTS) {
    record.attempts += 1;
    try {
      const run = await runJob<ArchiveRun>(runtime, ARCHIVE_PATH, { shard });
      record.receipts += run.receipts;
      if (run.complete) return record;
    } catch {
      record.failed += 1;
    }
  }
  throw new Error(`the archive's move on shard ${shard} did not complete in ${ATTEMPTS} instances`);
}
