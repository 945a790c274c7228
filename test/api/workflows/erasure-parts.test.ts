/**
 * docs/scale.md §6: an erasure over more shards than one instance of its Workflow has steps for.
 * The "workers-wide" project (vitest.config.ts) binds 27 shards, makes a part of an erasure
 * `widePartShards` shards, and holds every instance of the Workflow to `wideStepLimit` steps, the
 * 1,024 of Cloudflare's Workflows scaled down: the runtime fails an instance that takes one more.
 */
import { requestErasure, startErasure } from "../../../src/api/workflows/erasure-workflow.ts";
import { env } from "cloudflare:workers";
import { introspectWorkflow, introspectWorkflowInstance } from "cloudflare:test";
import { describe, expect, inject, it } from "vitest";
import type { PartOutput } from "../../../src/api/workflows/erasure-parts.ts";
import type { Erasure } from "../../../src/storage/erasure.ts";
import { uniqueId } from "../../support/api.ts";
import { SHARDS, idOn, rowsOnEveryShard } from "../../support/shards.ts";

const STEP_LIMIT = inject("wideStepLimit");
const PART_SHARDS = inject("widePartShards");

/** A receipt of `appUserId` on every shard, put in directly; returns their IDs. */
async function receiptOnEveryShard(appUserId: string): Promise<string[]> {
  const ids = SHARDS.map((shard) => idOn(shard));
  await Promise.all(
    SHARDS.map((shard, index) =>
      shard.db
        .prepare("INSERT INTO receipts (receipt_id, chain_id, client_id, app_user_id, body, created_at) VALUES (?1, 'chain-1', 'client-1', ?2, '{}', ?3)")
        .bind(ids[index], appUserId, new Date(Date.now() - 1000).toISOString())
        .run(),
    ),
  );
  return ids;
}

async function receiptsOf(appUserId: string): Promise<number> {
  return (await rowsOnEveryShard("SELECT 1 FROM receipts WHERE app_user_id = ?", appUserId)).length;
}

describe("docs/scale.md §6 an erasure over more shards than one instance has steps for", () => {
  it("runs in parts, each instance within its steps, erases every shard and records one app_user.erased event", async () => {
    const victim = uniqueId("shopper");
    const neighbour = `${victim}0`;
    await receiptOnEveryShard(victim);
    await receiptOnEveryShard(neighbour);
    const id = uniqueId("erasure");

    await using everyInstance = await introspectWorkflow(env.ERASURE);
    await using erasure = await introspectWorkflowInstance(env.ERASURE, id);
    await startErasure(env, victim, id);
    await erasure.waitForStatus("complete");
    const output = (await erasure.getOutput()) as Erasure;

    // The erasure and its parts all completed: an instance past the step limit would have errored.
    const instances = await everyInstance.get();
    const parts = Math.ceil(SHARDS.length / PART_SHARDS);
    expect(instances).toHaveLength(1 + parts);
    const partShards: string[][] = [];
    for (const instance of instances) {
      await instance.waitForStatus("complete");
      const done = (await instance.getOutput()) as Erasure | PartOutput;
      if (!("event" in done)) partShards.push(Object.keys(done.shards));
    }
    expect(partShards).toHaveLength(parts);
    for (const names of partShards) expect(names.length).toBeLessThanOrEqual(PART_SHARDS);
    expect(partShards.flat().sort()).toEqual(SHARDS.map((shard) => shard.name).sort());

    expect(output.receipts_erased).toBe(SHARDS.length);
    expect(output.shards).toEqual(Object.fromEntries(SHARDS.map((shard) => [shard.name, 1])));
    expect(await receiptsOf(victim)).toBe(0);
    expect(await receiptsOf(neighbour)).toBe(SHARDS.length);
    const events = await rowsOnEveryShard<{ event_id: string }>(
      "SELECT event_id FROM notice_outbox WHERE json_extract(payload, '$.type') = 'app_user.erased' AND json_extract(payload, '$.app_user_id') = ?",
      victim,
    );
    expect(events).toEqual([{ event_id: output.event.event_id }]);
    expect(await rowsOnEveryShard("SELECT 1 FROM erasure_fences WHERE instant = ?", output.event.occurred_at)).toHaveLength(SHARDS.length);
  });

  it("one instance over every shard runs out of steps and stops part-way: the limit the parts keep within is in force", async () => {
    const victim = uniqueId("shopper");
    await receiptOnEveryShard(victim);
    const id = uniqueId("erasure");
    await using instance = await introspectWorkflowInstance(env.ERASURE, id);
    const part = { event_id: idOn(SHARDS[0]), occurred_at: new Date().toISOString(), shards: SHARDS.map((shard) => shard.name) };
    await env.ERASURE.create({ id, params: { request_id: await requestErasure(env, victim), part } });
    await instance.waitForStatus("errored");
    expect((await instance.getError()).message).toContain(`limit of ${STEP_LIMIT} steps`);
    expect(await receiptsOf(victim)).toBe(SHARDS.length - STEP_LIMIT);
  });
});
