/**
 * The notice crossing Workers for real: delete on the API Worker, the notices queue, the notifier
 * Worker running beside it (test/support/notifier-worker.ts), the dead-letter queue, and the push
 * receiver. The cron job is run by hand, as the every-minute trigger would.
 */
import { createExecutionContext, waitOnExecutionContext } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { apiConfig } from "../../src/shared/config.ts";
import { DELIVERED_RETENTION_MS, purgeDelivered, resendPendingNotices } from "../../src/api/scheduled.ts";
import { createApp } from "../../src/api/app.ts";
import { runScheduledJobs } from "../../src/api/scheduled.ts";
import { replayFailed } from "../../src/storage/outbox/statements.ts";
import { runBatch } from "../../src/storage/statement.ts";
import { BASE, call, issueClient, loginToken } from "../support/api.ts";
import {
  type SeededReceipt,
  deleteHeadersFor,
  expectSignedPush,
  failedRows,
  outboxRows,
  pushesFor,
  receiptExists,
  receiverAnswers,
  seedReceipt,
  waitForDelivery,
  waitForPushes,
} from "../support/notices.ts";
import { PATHS } from "../../src/shared/paths.ts";
import { SHARDS, dbOf } from "../support/shards.ts";
import { shardOfId } from "../../src/storage/shards.ts";

async function owner(): Promise<{ token: string; receipt: SeededReceipt }> {
  const client = await issueClient();
  return { token: await loginToken(client), receipt: await seedReceipt(client) };
}

/** Deletes through a fresh app whose queue refuses every send, as during a Queues outage. */
async function deleteWhileQueueFails(token: string, receipt: SeededReceipt): Promise<number> {
  const failingQueue = {
    send: () => Promise.reject(new Error("Queue send failed: service unavailable")),
    sendBatch: () => Promise.reject(new Error("Queue send failed: service unavailable")),
  } as unknown as Queue;
  const ctx = createExecutionContext();
  const response = await createApp().fetch(
    new Request(BASE + PATHS.delete, { method: "POST", headers: deleteHeadersFor(token, receipt) }),
    { ...env, NOTICES: failingQueue },
    ctx,
  );
  await response.text();
  await waitOnExecutionContext(ctx);
  return response.status;
}

const inAMinute = () => new Date(Date.now() + 31_000);

describe("docs/api.md#deletion-notices delivery across Workers", () => {
  it("delete → queue → notifier → push service: one push, signed, and recorded as delivered", async () => {
    const { token, receipt } = await owner();
    expect((await call(PATHS.delete, { headers: deleteHeadersFor(token, receipt) })).status).toBe(200);
    const [push] = await waitForPushes(receipt.receipt_id);
    const notice = await expectSignedPush(push!);
    expect(notice).toMatchObject({ type: "receipt.deleted", receipt_id: receipt.receipt_id });
    await waitForDelivery(receipt.receipt_id);
    expect(await pushesFor(receipt.receipt_id)).toHaveLength(1);
  });

  it("a re-sent copy of a delivered notice reaches the notifier and is not pushed again", async () => {
    const { token, receipt } = await owner();
    await call(PATHS.delete, { headers: deleteHeadersFor(token, receipt) });
    await waitForPushes(receipt.receipt_id);
    await waitForDelivery(receipt.receipt_id);
    const [row] = await outboxRows(receipt.receipt_id);
    await env.NOTICES.send(JSON.parse(row!.payload), { contentType: "json" });
    await env.NOTICES.send(JSON.parse(row!.payload), { contentType: "json" });
    // The copies are consumed (the outbox sees no new attempt) and nothing more is pushed.
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(await pushesFor(receipt.receipt_id)).toHaveLength(1);
    expect((await outboxRows(receipt.receipt_id))[0]!.attempts).toBe(1);
  });
});

describe("docs/api.md#deletion-notices nothing is lost: the cron re-send", () => {
  it("a queue send that throws at delete time: the delete still succeeds, and the cron job delivers the notice", async () => {
    const { token, receipt } = await owner();
    expect(await deleteWhileQueueFails(token, receipt)).toBe(200);
    expect(await receiptExists(receipt.receipt_id)).toBe(false);
    expect(await outboxRows(receipt.receipt_id)).toMatchObject([{ enqueued_at: null, delivered_at: null }]);

    // Within the grace period the job leaves it alone: the send at delete time may still land.
    await runScheduledJobs(env);
    expect(await outboxRows(receipt.receipt_id)).toMatchObject([{ enqueued_at: null }]);

    await runScheduledJobs(env, inAMinute());
    const [push] = await waitForPushes(receipt.receipt_id);
    await expectSignedPush(push!);
    await waitForDelivery(receipt.receipt_id);
    expect((await outboxRows(receipt.receipt_id))[0]!.enqueued_at).not.toBeNull();
    // A later tick finds nothing left to send.
    await runScheduledJobs(env, new Date(Date.now() + 120_000));
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(await pushesFor(receipt.receipt_id)).toHaveLength(1);
  });

  it("a notice enqueued long ago and never delivered lost its queue copy: the cron job sends it again", async () => {
    const { token, receipt } = await owner();
    await deleteWhileQueueFails(token, receipt);
    const longAgo = new Date(Date.now() - apiConfig(env).noticeLostAfterMs - 60_000).toISOString();
    const shard = shardOfId(SHARDS, receipt.receipt_id)!;
    await shard.db.prepare("UPDATE notice_outbox SET enqueued_at = ? WHERE receipt_id = ?").bind(longAgo, receipt.receipt_id).run();
    const { resent } = await resendPendingNotices(env, shard, new Date(), apiConfig(env));
    expect(resent).toBeGreaterThanOrEqual(1);
    await waitForPushes(receipt.receipt_id);
    await waitForDelivery(receipt.receipt_id);
  });
});

describe("docs/api.md#deletion-notices dead letters across Workers", () => {
  it("a push refused for good goes through the dead-letter queue into failed_notices; replay and the cron job deliver it", async () => {
    const { token, receipt } = await owner();
    await receiverAnswers(receipt.receipt_id, 410);
    expect((await call(PATHS.delete, { headers: deleteHeadersFor(token, receipt) })).status).toBe(200);
    await expect.poll(() => failedRows(receipt.receipt_id), { timeout: 10_000 }).toHaveLength(1);
    const failed = await failedRows(receipt.receipt_id);
    expect(failed[0]).toMatchObject({ attempts: 1, last_error: "HTTP 410 from the push service" });
    expect(await outboxRows(receipt.receipt_id)).toEqual([]);

    // The app side is fixed; the operator replays (npm run notices -- replay <event_id>).
    await receiverAnswers(receipt.receipt_id, 200);
    await runBatch(dbOf(receipt.receipt_id), replayFailed([failed[0]!.event_id as string]));
    expect(await failedRows(receipt.receipt_id)).toEqual([]);

    await runScheduledJobs(env, inAMinute());
    await waitForDelivery(receipt.receipt_id);
    const pushes = await pushesFor(receipt.receipt_id);
    expect(pushes.map((push) => push.status)).toEqual([410, 200]);
    await expectSignedPush(pushes[1]!);
  });
});

describe("docs/api.md#deletion-notices outbox lifetime", () => {
  it("the purge job deletes delivered notices after 14 days and keeps undelivered ones", async () => {
    const { token, receipt } = await owner();
    await call(PATHS.delete, { headers: deleteHeadersFor(token, receipt) });
    await waitForDelivery(receipt.receipt_id);
    const stuck = await owner();
    await deleteWhileQueueFails(stuck.token, stuck.receipt);

    const shard = shardOfId(SHARDS, receipt.receipt_id)!;
    await purgeDelivered(env, shard, new Date(Date.now() + DELIVERED_RETENTION_MS - 60_000));
    expect(await outboxRows(receipt.receipt_id)).toHaveLength(1);
    const { purged } = await purgeDelivered(env, shard, new Date(Date.now() + DELIVERED_RETENTION_MS + 60_000));
    expect(purged).toBeGreaterThanOrEqual(1);
    expect(await outboxRows(receipt.receipt_id)).toEqual([]);
    expect(await outboxRows(stuck.receipt.receipt_id)).toHaveLength(1);
  });
});
