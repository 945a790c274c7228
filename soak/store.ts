/**
 * The soak's view of the shards: the drain that runs the cron until every shard's outbox has
 * nothing undelivered (replaying dead letters as an operator would, with the statements of
 * `npm run notices -- replay`), and the snapshot the reconciliation reads: the shards' rows and
 * the archive's lines.
 */
import { setTimeout as sleep } from "node:timers/promises";
import {
  countFailed,
  countUndelivered,
  everyEvent,
  everyFailedEvent,
  listFailed,
  replayFailed,
} from "../src/storage/outbox/statements.ts";
import { statement, type Statement } from "../src/storage/statement.ts";
import { readReceipts } from "../src/storage/archive/objects.ts";
import { STORED_COLUMNS, storedTexts, type ReceiptTexts, type StoredColumns } from "../src/storage/stored-body.ts";
import type { StoreSnapshot } from "./reconcile.ts";
import type { SoakRuntime } from "./runtime.ts";

/** Where the export files lie in the archive's bucket, beside the archived receipts. */
const EXPORT_FILES = "exports/";

/** What the drain did. */
export interface Drain {
  seconds: number;
  /** Whether every shard's outbox had nothing undelivered and no dead letter was left. */
  complete: boolean;
  /** Dead letters replayed, and how many replays it took. */
  replayed: number;
  replays: number;
  /**
   * Of the dead letters, those not refused for good (any answer but a 4xx other than 408 and
   * 429): events that ran out of retries, which a push outage within the retry window must not
   * cause. A line each: the event, its type, attempts and last error, for the report's examples.
   */
  afterRetries: string[];
}

interface FailedRow {
  event_id: string;
  type: string;
  failed_at: string;
  attempts: number;
  last_error: string;
}

// The errors of an answer that retrying cannot change (src/notifier/push.ts).
const REFUSED_FOR_GOOD = /^HTTP (?!408|429)4\d\d /;

/**
 * Runs the cron every `periodMs` until no shard holds an undelivered event or a dead letter, for
 * at most `limitMs`. Dead letters are replayed once the push service is healthy again, which is
 * when an operator would (docs/operations.md, "Replay failed notices").
 */
export async function drain(runtime: SoakRuntime, periodMs: number, limitMs: number): Promise<Drain> {
  const started = Date.now();
  let replayed = 0;
  let replays = 0;
  const afterRetries: string[] = [];
  for (;;) {
    await runtime.runCron();
    let undelivered = 0;
    for (const { binding } of runtime.shards) {
      const [pending, failed] = await runtime.sql(binding, [countUndelivered(), countFailed()]);
      undelivered += (pending!.results[0] as { n: number }).n;
      const failedNow = (failed!.results[0] as { n: number }).n;
      if (failedNow > 0) {
        const [listed] = await runtime.sql(binding, [listFailed()]);
        for (const row of (listed!.results as unknown as FailedRow[]).filter(({ last_error }) => !REFUSED_FOR_GOOD.test(last_error))) {
          afterRetries.push(`${row.event_id} (${row.type}, ${row.attempts} attempts, failed ${row.failed_at}): ${row.last_error}`);
        }
        const results = await runtime.sql(binding, replayFailed([]));
        replayed += results.at(-1)!.results.length;
        replays += 1;
        undelivered += failedNow;
      }
    }
    const seconds = (Date.now() - started) / 1000;
    if (undelivered === 0) return { seconds, complete: true, replayed, replays, afterRetries };
    if (Date.now() - started > limitMs) return { seconds, complete: false, replayed, replays, afterRetries };
    await sleep(periodMs);
  }
}

/**
 * Every shard's rows, as the reconciliation reads them, and every line of the archive but those
 * of receipts deleted since their move (tombstoned, their line purged within a day): an archived
 * receipt is stored as much as one in its shard, and one in both, or twice in the archive, is
 * stored twice.
 */
export async function snapshotStore(runtime: SoakRuntime): Promise<StoreSnapshot> {
  const snapshot: StoreSnapshot = { receipts: [], outbox: [], failed: [], keys: [], archived: 0 };
  const tombstoned = new Set<string>();
  for (const { binding, name } of runtime.shards) {
    const rows = async <T>(query: Statement) => (await runtime.sql(binding, [query]))[0]!.results as T[];
    const stored = await rows<Omit<StoreSnapshot["receipts"][number], "marker"> & StoredColumns>(
      statement(`SELECT receipt_id, app_user_id, created_at, ${STORED_COLUMNS.join(", ")} FROM receipts`),
    );
    for (const row of stored) {
      const { receipt_id, app_user_id, created_at } = row;
      snapshot.receipts.push({ receipt_id, marker: markerOf(await storedTexts(row)), app_user_id, created_at });
    }
    snapshot.outbox.push(...(await rows<StoreSnapshot["outbox"][number]>(everyEvent())));
    snapshot.failed.push(...(await rows<StoreSnapshot["failed"][number]>(everyFailedEvent())));
    const keys = await rows<Omit<StoreSnapshot["keys"][number], "shard">>(
      statement("SELECT client_id, idempotency_key, receipt_id, created_at, erased_at FROM idempotency_keys"),
    );
    snapshot.keys.push(...keys.map((key) => ({ ...key, shard: name })));
    for (const { receipt_id } of await rows<{ receipt_id: string }>(statement("SELECT receipt_id FROM archive_tombstones"))) tombstoned.add(receipt_id);
  }
  const bucket = await runtime.archive();
  let cursor: string | undefined;
  do {
    const listed = await bucket.list({ cursor });
    for (const { key } of listed.objects) {
      // The bucket holds the app's export files too (src/storage/export.ts exportPrefix): copies, not receipts stored.
      if (key.startsWith(EXPORT_FILES)) continue;
      for (const line of (await readReceipts(bucket, key)) ?? []) {
        if (tombstoned.has(line.receipt_id)) continue;
        const marker = markerOf({ body: line.body, mapped: line.mapped ?? null });
        snapshot.receipts.push({ receipt_id: line.receipt_id, marker, app_user_id: line.app_user_id, created_at: line.created_at });
        snapshot.archived += 1;
      }
    }
    cursor = listed.truncated ? listed.cursor : undefined;
  } while (cursor);
  return snapshot;
}

// A receipt's pos_receipt_number: a receipt added in DR Retail has it in its model (docs/api.md#dr-retail-mapping).
function markerOf({ body, mapped }: ReceiptTexts): string | null {
  return (JSON.parse(mapped ?? body) as { pos_receipt_number?: string }).pos_receipt_number ?? null;
}
