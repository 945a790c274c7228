/**
 * receipt.created events (docs/api.md#receipt-events) across both Workers: recorded with the
 * receipt, pushed signed with the body as stored, none for a replay, and never after the
 * receipt's receipt.deleted.
 */
import { env } from "cloudflare:workers";
import { describe, expect, it, vi } from "vitest";
import { runScheduledJobs } from "../../src/api/scheduled.ts";
import { PATHS } from "../../src/shared/paths.ts";
import { receiptCreatedEvent, receiptDeletedEvent } from "../../src/shared/schemas.ts";
import { replayFailed } from "../../src/storage/outbox/statements.ts";
import { runBatch } from "../../src/storage/statement.ts";
import { call, newCaller, postAdd, uniqueId, validReceiptBody } from "../support/api.ts";
import { drRetailContentType } from "../../src/shared/dr-retail-profiles.ts";
import { drTestReceipts } from "../support/dr-retail.ts";
import {
  deleteHeadersFor,
  expectSignedPush,
  failedRows,
  outboxRows,
  pushesFor,
  receiverAnswers,
  waitForDelivery,
  waitForPushes,
} from "../support/notices.ts";
import { dbOf } from "../support/shards.ts";

const inAMinute = () => new Date(Date.now() + 31_000);

describe("docs/api.md#receipt-events receipt.created", () => {
  it("each add gives one signed receipt.created carrying the body as stored", async () => {
    const caller = await newCaller();
    const text = JSON.stringify(validReceiptBody(), null, 1);
    const answer = await postAdd(caller.headers, text);
    expect(answer.status).toBe(200);
    const { receipt_id, created_at } = answer.body.data;
    const [push] = await waitForPushes(receipt_id);
    const event = (await expectSignedPush(push!)) as unknown as Record<string, unknown>;
    expect(event).toEqual({
      event_id: expect.any(String),
      type: "receipt.created",
      occurred_at: created_at,
      receipt_id,
      app_user_id: caller.headers.app_user_id,
      chain_id: caller.headers.chain_id,
      client_id: caller.client.clientId,
      created_at,
      receipt: JSON.parse(text),
    });
    // The schema the OpenAPI document gives this webhook describes it.
    expect(receiptCreatedEvent.safeParse(JSON.parse(push!.body)).success).toBe(true);
    // The body's own bytes, spliced in as add stored them.
    expect(push!.body.endsWith(`,"receipt":${text}}`)).toBe(true);
    await waitForDelivery(receipt_id, 1);
    // The outbox keeps the event without a second copy of the body.
    const [row] = await outboxRows(receipt_id);
    expect(row!.payload).not.toContain("receipt\":");
  });

  it("docs/api.md#dr-retail a DR Retail receipt's receipt.created carries it in our model, with its format and the original as sent", async () => {
    const receipt = drTestReceipts().find(({ name }) => name.startsWith("return"))!;
    const caller = await newCaller();
    const text = JSON.stringify(receipt.body, null, 1);
    const answer = await postAdd({ ...caller.headers, "Content-Type": drRetailContentType(receipt.version) }, text);
    expect(answer.status).toBe(200);
    const { receipt_id, created_at } = answer.body.data;
    const [push] = await waitForPushes(receipt_id);
    const event = (await expectSignedPush(push!)) as unknown as Record<string, any>;
    expect(event).toMatchObject({ type: "receipt.created", receipt_id, created_at, format: "dr-retail/v1.1", original: receipt.body });
    expect(event.receipt).toMatchObject({ total: -10000, currency: "SEK", pos_receipt_number: "0042-3-000119" });
    expect(event.receipt.line_items[0].receipt_reference).toEqual({ value: "0042-3-000117", context: "store" });
    expect(receiptCreatedEvent.safeParse(event).error).toBeUndefined();
    // The original's own bytes, spliced in as add stored them.
    expect(push!.body.endsWith(`,"format":"dr-retail/v1.1","original":${text}}`)).toBe(true);
  });

  it("a replay records no second event, and 20 racing replays record one", async () => {
    const caller = await newCaller();
    const keyed = { ...caller.headers, "Idempotency-Key": uniqueId("key") };
    const answers = await Promise.all(Array.from({ length: 20 }, () => postAdd(keyed)));
    const receiptId = answers[0]!.body.data.receipt_id;
    expect(new Set(answers.map((answer) => answer.body.data.receipt_id))).toEqual(new Set([receiptId]));
    expect((await postAdd(keyed)).status).toBe(200);
    await waitForDelivery(receiptId, 1);
    expect(await outboxRows(receiptId)).toHaveLength(1);
    expect(await pushesFor(receiptId)).toHaveLength(1);
  });

  it("add then delete while the push endpoint fails: created before deleted, or deleted alone, never after", async () => {
    const caller = await newCaller();
    const answer = await postAdd(caller.headers);
    const receiptId = answer.body.data.receipt_id as string;
    await receiverAnswers(receiptId, 503);
    expect((await call(PATHS.delete, { headers: deleteHeadersFor(caller.token, { ...answer.body.data }) })).status).toBe(200);
    // The endpoint comes back; the queue's retries and the cron job carry on.
    await new Promise((resolve) => setTimeout(resolve, 300));
    await receiverAnswers(receiptId, 200);
    await runScheduledJobs(env, inAMinute());
    await vi.waitFor(
      async () => {
        const delivered = (await pushesFor(receiptId)).filter((push) => push.status === 200);
        if (!delivered.some((push) => JSON.parse(push.body).type === "receipt.deleted")) throw new Error("deleted not yet delivered");
      },
      { timeout: 20_000, interval: 100 },
    );
    await new Promise((resolve) => setTimeout(resolve, 500));
    const delivered = (await pushesFor(receiptId)).filter((push) => push.status === 200).map((push) => JSON.parse(push.body));
    const types = delivered.map((event) => event.type);
    expect(receiptDeletedEvent.safeParse(delivered.find((event) => event.type === "receipt.deleted")).success).toBe(true);
    const deletedAt = types.indexOf("receipt.deleted");
    expect(types.slice(deletedAt + 1)).not.toContain("receipt.created");
    expect(types.filter((type) => type === "receipt.deleted")).toHaveLength(1);
    // The queue retries a failed push after 10 s (src/notifier/retry.ts): the test waits for that.
  }, 30_000);

  it("a created event refused for good goes to the failed notices; replay delivers it", async () => {
    const caller = await newCaller();
    const answer = await postAdd(caller.headers);
    const receiptId = answer.body.data.receipt_id as string;
    await receiverAnswers(receiptId, 410);
    await expect.poll(() => failedRows(receiptId), { timeout: 10_000 }).toHaveLength(1);
    const [failed] = await failedRows(receiptId);
    expect(JSON.parse(failed!.payload as string).type).toBe("receipt.created");

    await receiverAnswers(receiptId, 200);
    await runBatch(dbOf(receiptId), replayFailed([failed!.event_id as string]));
    await runScheduledJobs(env, inAMinute());
    await waitForDelivery(receiptId, 1);
    const pushes = await pushesFor(receiptId);
    expect(pushes.map((push) => push.status)).toEqual([410, 200]);
    expect(JSON.parse(pushes[1]!.body).receipt).toEqual(validReceiptBody());
  });
});
