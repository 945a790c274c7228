/**
 * docs/operations.md every push attempt writes one Analytics Engine data point: the event type, the
 * outcome and the push service's status, client, chain, shard, the push's duration and bytes and
 * the delay from the change to the attempt; never an app_user_id, receipt content or the secret.
 */
import { createExecutionContext, createMessageBatch, getQueueResult } from "cloudflare:test";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import type { NotifierEnv } from "../../src/shared/env.ts";
import type { DeletionNotice } from "../../src/shared/types.ts";
import { createNotifier } from "../../src/notifier/index.ts";
import { shardOfId } from "../../src/storage/shards.ts";
import { TEST_PUSH_SECRET } from "../support/keys.ts";
import { CountingDataset, fieldsOf } from "../support/metrics.ts";
import { DEPLOYED_PUSH_SETTINGS, deletedNotice, forgetPushEndpoint } from "../support/notices.ts";
import { SHARDS } from "../support/shards.ts";
import { recordingQueue } from "../support/queues.ts";

let answers: number[];

beforeEach(async () => {
  await forgetPushEndpoint();
  answers = [];
  vi.stubGlobal("fetch", vi.fn(async (input: RequestInfo | URL, init?: RequestInit) => {
    await new Request(input, init).text();
    return new Response(null, { status: answers.shift() ?? 200 });
  }));
});

afterEach(async () => {
  vi.unstubAllGlobals();
  await forgetPushEndpoint();
});

describe("docs/operations.md a data point per push attempt", () => {
  it("a delivered push, one refused, one to be retried: a point each, without the app user", async () => {
    const metrics = new CountingDataset();
    const notices = [await deletedNotice(), await deletedNotice(), await deletedNotice()];
    answers = [200, 410, 503];
    const workerEnv: NotifierEnv = {
      ...Object.fromEntries(SHARDS.map((shard) => [shard.binding, shard.db])),
      NOTICES: recordingQueue(),
      FAILED_NOTICES: recordingQueue(),
      APP_PUSH_URL: "https://push.example.test/receipts",
      APP_PUSH_SECRET: TEST_PUSH_SECRET,
      ...DEPLOYED_PUSH_SETTINGS,
      METRICS: metrics,
    };
    // One at a time, so that each gets its answer in order.
    for (const notice of notices) {
      const batch = createMessageBatch<DeletionNotice>("receipts-v2-notices", [{ id: crypto.randomUUID(), timestamp: new Date(), attempts: 1, body: notice }]);
      const ctx = createExecutionContext();
      await createNotifier().queue(batch, workerEnv);
      await getQueueResult(batch, ctx);
    }
    expect(metrics.points).toHaveLength(3);
    const fields = metrics.points.map(fieldsOf);
    expect(fields.map((point) => [point.kind, point.route, point.outcome, point.status])).toEqual([
      ["push", "receipt.deleted", "delivered", 200],
      ["push", "receipt.deleted", "refused", 410],
      ["push", "receipt.deleted", "retry", 503],
    ]);
    notices.forEach((notice, i) => {
      expect(fields[i]).toMatchObject({ clientId: notice.client_id, chainId: notice.chain_id, shard: shardOfId(SHARDS, notice.receipt_id)!.name });
      expect(fields[i]!.bytes).toBeGreaterThan(0);
      expect(fields[i]!.delayMs).toBeGreaterThanOrEqual(0);
      expect(fields[i]!.delayMs).toBeLessThan(60_000);
    });
    const written = JSON.stringify(metrics.points);
    for (const notice of notices) {
      expect(written).not.toContain(notice.app_user_id);
      expect(written).not.toContain(notice.receipt_id);
      expect(written).not.toContain(notice.event_id);
    }
    expect(written).not.toContain(TEST_PUSH_SECRET);
  });
});
