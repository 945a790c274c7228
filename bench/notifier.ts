/**
 * The notifier's target of `npm run bench`: receipt.created events delivered per
 * second end to end — the notices queue, the notifier (claims, the receipt's body, a signed push,
 * records) and a local receiver that answers 204 — against a floor consumer that does only what
 * any exactly-once consumer must: one D1 round trip a batch to claim its events, a Standard
 * Webhooks signature on each push, one round trip to record the outcomes. Both run in a Miniflare of their own, with the notifier's own wrangler config, so its
 * batch settings are the deployed ones. Each run names how long the receiver waits before it
 * answers: at once, the push costs next to nothing and the ratio is the bookkeeping's cost alone;
 * after a few milliseconds, it is what a push service on the network makes of it.
 */
import { Miniflare, convertV4MiniflareOptions, type V4WorkerOptions } from "miniflare";
import { v7 as uuidv7 } from "uuid";
import { unstable_getMiniflareWorkerOptions } from "wrangler";
import { LOOPBACK, NOTIFIER_CONFIG, applyMigrations, bundled } from "../harness/miniflare.ts";
import { readShards } from "../scripts/lib/shards.ts";
import { stampShardTag } from "../src/shared/shard-ids.ts";
import type { CreationNotice } from "../src/shared/types.ts";
import type { Bundles } from "./build.ts";
import { startReceiver, type Receiver } from "./receiver.ts";

/** How many events each side delivers, and how long the receiver waits before each answer. */
export interface NotifierRun {
  events: number;
  pushDelayMs: number;
}

/** What a run of the notifier and its floor gave. */
export interface NotifierResult extends NotifierRun {
  eventsPerSecond: number;
  floorEventsPerSecond: number;
}

const NOTICES_QUEUE = "receipts-v2-notices";
const FLOOR_QUEUE = "bench-floor-notices";
const SEND_BATCH = 100;
/** How many turns each side's deliveries are split into. */
const TURNS = 5;
/** Events through each side first, untimed, so neither pays its isolate's cold start in the timing. */
const WARM_UP = 400;
/** Where the floor consumer claims each event and records its outcome (bench/workers/floor-consumer.ts). */
const FLOOR_CLAIMS_TABLE = "CREATE TABLE IF NOT EXISTS floor_claims (event_id TEXT PRIMARY KEY, state TEXT NOT NULL) WITHOUT ROWID";

/** Delivers each run's created events through the notifier and as many through the floor, in turns. */
export async function benchNotifier(bundles: Bundles, runs: readonly NotifierRun[], body: string): Promise<NotifierResult[]> {
  const events = runs.reduce((sum, run) => sum + run.events, 0);
  const receiver = await startReceiver();
  const notifier = unstable_getMiniflareWorkerOptions(NOTIFIER_CONFIG).workerOptions;
  const secret = `whsec_${Buffer.from(crypto.getRandomValues(new Uint8Array(32))).toString("base64")}`;
  // The floor batches as the notifier does: the settings of its wrangler config.
  const configured = (notifier.queueConsumers as Record<string, { maxBatchSize?: number; maxBatchTimeout?: number }> | undefined)?.[
    NOTICES_QUEUE
  ];
  const consumerSettings = { maxBatchSize: configured?.maxBatchSize ?? 10, maxBatchTimeout: configured?.maxBatchTimeout ?? 1 };
  const mf = new Miniflare(
    convertV4MiniflareOptions({
      host: LOOPBACK,
      port: 0,
      // The notifier logs a line per event; the timing needs none of them.
      handleStructuredLogs: () => {},
      workers: [
        {
          ...bundled(notifier, "notifier", bundles.notifier),
          // Its own vars (the push timeout, the retry backoff) as deployed, with the bench's push target.
          bindings: { ...(notifier.bindings as Record<string, string>), APP_PUSH_URL: receiver.url, APP_PUSH_SECRET: secret },
        },
        ({
          name: "floor-consumer",
          modules: true,
          scriptPath: bundles.floorConsumer,
          compatibilityDate: notifier.compatibilityDate as string,
          // The notifier's secret: the floor signs each push as it does.
          bindings: { PUSH_URL: receiver.url, PUSH_SECRET: secret },
          d1Databases: { FLOOR_DB: "bench-floor-claims" },
          queueConsumers: { [FLOOR_QUEUE]: consumerSettings },
          queueProducers: { NOTICES: NOTICES_QUEUE, FLOOR: FLOOR_QUEUE },
        } satisfies V4WorkerOptions),
      ],
    }),
  );
  try {
    await mf.ready;
    const shards = readShards(NOTIFIER_CONFIG);
    const notices: CreationNotice[] = [];
    for (const { binding, tag } of shards) {
      const db = await mf.getD1Database(binding, "notifier");
      await applyMigrations(db);
      notices.push(...(await seedCreated(db, tag, Math.ceil((events + WARM_UP) / shards.length), body)));
    }
    await (await mf.getD1Database("FLOOR_DB", "floor-consumer")).exec(FLOOR_CLAIMS_TABLE);
    const warm = notices.slice(events, events + WARM_UP);
    await timeDeliveries(receiver, warm, await mf.getQueueProducer("NOTICES", "floor-consumer"));
    await timeDeliveries(receiver, warm, await mf.getQueueProducer("FLOOR", "floor-consumer"));
    const notifierQueue = await mf.getQueueProducer("NOTICES", "floor-consumer");
    const floorQueue = await mf.getQueueProducer("FLOOR", "floor-consumer");
    const results: NotifierResult[] = [];
    let first = 0;
    for (const run of runs) {
      const measured = notices.slice(first, first + run.events);
      first += run.events;
      receiver.delayMs = run.pushDelayMs;
      // In turns, as the routes are timed, so a burst of other work on the machine falls on both
      // sides alike; each turn hands the notifier a fresh share of the seeded events.
      const turn = Math.ceil(measured.length / TURNS);
      let notifierMs = 0;
      let floorMs = 0;
      for (let start = 0; start < measured.length; start += turn) {
        const share = measured.slice(start, start + turn);
        notifierMs += await timeDeliveries(receiver, share, notifierQueue);
        floorMs += await timeDeliveries(receiver, share, floorQueue);
      }
      const perSecond = (ms: number) => measured.length / (ms / 1000);
      results.push({ ...run, eventsPerSecond: perSecond(notifierMs), floorEventsPerSecond: perSecond(floorMs) });
    }
    return results;
  } finally {
    await mf.dispose();
    receiver.server.close();
  }
}

// Receipts and their created events in the outbox, as add leaves them before the queue send: one
// receipt a millisecond, as a shard taking 1,000 adds a second would. (Made all at once, hundreds
// would share a millisecond, and the claim's look for the created event of a receipt, which
// searches the IDs made in the receipt's millisecond, would read hundreds of rows where add leaves one.)
async function seedCreated(
  db: Awaited<ReturnType<Miniflare["getD1Database"]>>,
  tag: number,
  count: number,
  body: string,
): Promise<CreationNotice[]> {
  const now = new Date().toISOString();
  const firstMs = Date.now() - count;
  const notices = Array.from({ length: count }, (_, i): CreationNotice => {
    const receiptId = stampShardTag(uuidv7({ msecs: firstMs + i }), tag);
    return {
      event_id: stampShardTag(uuidv7({ msecs: firstMs + i }), tag),
      type: "receipt.created",
      occurred_at: now,
      receipt_id: receiptId,
      app_user_id: `bench-user-${i % 50}`,
      chain_id: "chain-bench",
      client_id: "bench-notifier",
      created_at: now,
    };
  });
  for (let i = 0; i < notices.length; i += SEND_BATCH) {
    const statements = notices.slice(i, i + SEND_BATCH).flatMap((notice) => [
      db
        .prepare("INSERT INTO receipts (receipt_id, chain_id, client_id, app_user_id, body, created_at) VALUES (?, ?, ?, ?, ?, ?)")
        .bind(notice.receipt_id, notice.chain_id, notice.client_id, notice.app_user_id, body, now),
      db
        .prepare("INSERT INTO notice_outbox (event_id, receipt_id, payload, created_at) VALUES (?, ?, ?, ?)")
        .bind(notice.event_id, notice.receipt_id, JSON.stringify(notice), now),
    ]);
    await db.batch(statements);
  }
  return notices;
}

type Producer = Awaited<ReturnType<Miniflare["getQueueProducer"]>>;

// From the first send to the last delivery, in milliseconds.
async function timeDeliveries(receiver: Receiver, notices: CreationNotice[], queue: Producer): Promise<number> {
  const delivered = receiver.expect(notices.length);
  const started = performance.now();
  for (let i = 0; i < notices.length; i += SEND_BATCH) {
    await queue.sendBatch(notices.slice(i, i + SEND_BATCH).map((body) => ({ body, contentType: "json" as const })));
  }
  await delivered;
  return performance.now() - started;
}
