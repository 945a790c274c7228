/**
 * The soak's operator erasing app users as `npm run app-users -- erase` does: it starts the
 * erasure's Workflow instance in the running API Worker (through the wrapper's ERASE_PATH) and
 * waits for it, while the soak's faults strike inside its steps; every other erasure the app asks
 * for through the API instead (soak/app-jobs.ts), and the app exports a user's data before each.
 * Never across a restart of the runtime (see FaultDriver.outsideRestarts). An instance that fails
 * (a shard failing past its step's retries) is run again, as the operations guide tells an
 * operator to.
 */
import { setTimeout as sleep } from "node:timers/promises";
import { afterErasure, scanState, summarise } from "../harness/state-scan.ts";
import type { AppClient } from "../examples/app-feed.ts";
import type { Erasure } from "../src/storage/erasure.ts";
import { eraseOverApi, exportOverApi } from "./app-jobs.ts";
import type { AppUserErasure, ErasureRecord } from "./load.ts";
import { ERASE_PATH } from "./protocol.ts";
import type { SoakRuntime } from "./runtime.ts";

const ATTEMPTS = 10;
const PAUSE_MS = 1000;
const POLL_MS = 100;

/**
 * Erasures on the runtime, one every `pauseMs` (a range, in ms; see load.ts), every other one
 * asked for by the `app` client, which exports a user's data before each; each attempt runs
 * through `outsideRestarts`.
 */
export function soakErasure(
  runtime: SoakRuntime,
  pauseMs: readonly [number, number],
  outsideRestarts: <T>(work: () => Promise<T>) => Promise<T>,
  app: AppClient,
): AppUserErasure {
  let erasures = 0;
  return {
    pauseMs,
    async erase(appUserId) {
      erasures += 1;
      const via = erasures % 2 === 0 ? "app" : "operator";
      const record: ErasureRecord = { appUserId, start: Date.now(), end: 0, attempts: 0, via };
      let erasure: Erasure | undefined;
      while (record.attempts < ATTEMPTS && !erasure) {
        record.attempts += 1;
        try {
          erasure = await outsideRestarts(() => (via === "app" ? eraseOverApi(runtime, app, appUserId) : runErasure(runtime, appUserId)));
          Object.assign(record, { eventId: erasure.event.event_id, occurredAt: erasure.event.occurred_at, receiptsErased: erasure.receipts_erased });
        } catch {
          await sleep(PAUSE_MS);
        }
      }
      record.end = Date.now();
      if (erasure) {
        const { event } = erasure;
        // Read while no restart rewrites the files under the scan.
        record.scan = await outsideRestarts(async () => summarise(scanState(runtime.stateDir, appUserId, afterErasure(event))));
      }
      return record;
    },
    exportOf: (appUserId) => outsideRestarts(() => exportOverApi(app, appUserId, "load")),
  };
}

function runErasure(runtime: SoakRuntime, appUserId: string): Promise<Erasure> {
  return runJob<Erasure>(runtime, ERASE_PATH, { app_user_id: appUserId });
}

/**
 * One Workflow instance, started through the API wrapper's `path` (ERASE_PATH, ARCHIVE_PATH) with
 * `params` and followed to its end; returns its output, throws unless it completed.
 */
export async function runJob<Output>(runtime: SoakRuntime, path: string, params: unknown): Promise<Output> {
  const started = await fetch(`${runtime.apiUrl}${path}`, { method: "POST", body: JSON.stringify(params) });
  if (!started.ok) throw new Error(`${path}: not started, HTTP ${started.status}`);
  const { id } = (await started.json()) as { id: string };
  for (;;) {
    const answer = await fetch(`${runtime.apiUrl}${path}?id=${encodeURIComponent(id)}`);
    const status = (await answer.json()) as { status: string; output?: unknown; error?: { message: string } };
    if (status.status === "complete") return status.output as Output;
    if (status.status === "errored" || status.status === "terminated") throw new Error(`${path}: ${status.status}: ${status.error?.message}`);
    await sleep(POLL_MS);
  }
}
