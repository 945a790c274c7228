/**
 * docs/api.md#export-cut: an export holds exactly the receipts committed before its instant and
 * not deleted before it. Held before each of its steps, it is raced by an add, a delete of a live
 * receipt, a delete of an archived one and a move of a live one to the archive; every receipt is
 * then in the file or not by the instant alone, once, whole.
 */
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { parseAuditHashKey } from "../../../src/shared/audit-hash-key.ts";
import { PATHS } from "../../../src/shared/paths.ts";
import { exportAppUser, exportPrefix } from "../../../src/storage/export.ts";
import { runBatch } from "../../../src/storage/statement.ts";
import type { JobShard, StepRunner } from "../../../src/storage/steps.ts";
import { call, newCaller, postAdd, uniqueId, type Caller } from "../../support/api.ts";
import { archiveReceipt } from "../../support/archive.ts";
import { TEST_AUDIT_HASH_KEY } from "../../support/keys.ts";
import { deleteHeadersFor } from "../../support/notices.ts";
import { SHARDS, rowsOnEveryShard } from "../../support/shards.ts";
import { shardOfId } from "../../../src/shared/shard-ids.ts";

const HASH_KEY = parseAuditHashKey(TEST_AUDIT_HASH_KEY);

function jobShards(): JobShard[] {
  return SHARDS.map((shard) => ({ ...shard, run: async (statements) => (await runBatch(shard.db, statements)).map(({ results }) => results) }));
}

async function add(caller: Caller, appUserId: string): Promise<string> {
  const answer = await postAdd({ ...caller.headers, app_user_id: appUserId });
  expect(answer.status).toBe(200);
  return answer.body.data.receipt_id;
}

async function remove(caller: Caller, appUserId: string, receiptId: string): Promise<void> {
  const answer = await call(PATHS.delete, { headers: deleteHeadersFor(caller.token, { receipt_id: receiptId, client_id: caller.client.clientId, chain_id: caller.headers.chain_id!, app_user_id: appUserId }) });
  expect(answer.status).toBe(200);
}

/** The receipt IDs of an export's file, as many times as each appears. */
async function exportedIds(jobId: string): Promise<string[]> {
  const { objects } = await env.ARCHIVE.list({ prefix: exportPrefix(jobId) });
  const lines: { receipt_id?: string; receipt?: unknown }[] = [];
  for (const { key } of objects.sort((a, b) => a.key.localeCompare(b.key))) {
    const text = await (await env.ARCHIVE.get(key))!.text();
    lines.push(...text.split("\n").filter(Boolean).map((line) => JSON.parse(line)));
  }
  return lines.filter((line) => line.receipt !== undefined).map((line) => line.receipt_id!);
}

describe("docs/api.md#export-cut an export is a consistent cut of its app user's receipts", () => {
  it("raced at each of its steps by adds, deletes of live and archived receipts and moves to the archive, it holds exactly what was there at its instant, each once", async () => {
    const caller = await newCaller();
    const shopper = uniqueId("shopper");
    // Enough of each kind for a race at every step.
    const live: string[] = [];
    for (let i = 0; i < 24; i += 1) live.push(await add(caller, shopper));
    const archived = live.splice(0, 10);
    for (const id of archived) await archiveReceipt(id);
    const present = new Set([...live, ...archived]);
    let instant: string | undefined;
    const raced: string[] = [];

    // Before each step: an add, a delete of a live receipt, a delete of an archived one, a move of a live one.
    const racing: StepRunner = async (name, work) => {
      raced.push(name);
      const added = await add(caller, shopper);
      const deletedLive = live.pop();
      const deletedArchived = archived.pop();
      const moved = live.shift();
      if (deletedLive) await remove(caller, shopper, deletedLive);
      if (deletedArchived) await remove(caller, shopper, deletedArchived);
      if (moved) {
        await archiveReceipt(moved);
        archived.unshift(moved);
      }
      if (instant === undefined) {
        // Before the instant: the add is in, the deletes take their receipts out.
        present.add(added);
        for (const id of [deletedLive, deletedArchived]) if (id) present.delete(id);
      }
      live.push(added);
      const result = await work();
      if (name === "begin") instant = result as string;
      return result;
    };
    const jobId = uniqueId("export");
    const summary = await exportAppUser({ id: shopper, job_id: jobId }, jobShards(), HASH_KEY, env.ARCHIVE, { steps: racing, settle: async () => undefined });

    expect(raced).toEqual(expect.arrayContaining(["begin", "summary", expect.stringMatching(/^receipts /), expect.stringMatching(/^copies /), expect.stringMatching(/^archive /)]));
    const ids = await exportedIds(jobId);
    expect(ids.length, "each receipt once").toBe(new Set(ids).size);
    expect(new Set(ids)).toEqual(present);
    expect(summary.receipts).toBe(present.size);
    // Its holds, copies and reads are gone with its release.
    for (const table of ["export_holds", "export_copies", "export_seen"]) expect(await rowsOnEveryShard(`SELECT 1 FROM ${table} WHERE job_id = ?`, jobId), table).toEqual([]);
  }, 60_000);

  it("a receipt deleted after the instant is read whole from its copy; its archived twin's line waited for the hold", async () => {
    const caller = await newCaller();
    const shopper = uniqueId("shopper");
    const liveId = await add(caller, shopper);
    const archivedId = await add(caller, shopper);
    await archiveReceipt(archivedId);
    const jobId = uniqueId("export");
    const steps: StepRunner = async (name, work) => {
      const result = await work();
      // Right after the instant, both are deleted: the export still holds both, whole.
      if (name === "begin") {
        await remove(caller, shopper, liveId);
        await remove(caller, shopper, archivedId);
      }
      return result;
    };
    await exportAppUser({ id: shopper, job_id: jobId }, jobShards(), HASH_KEY, env.ARCHIVE, { steps, settle: async () => undefined });
    expect((await exportedIds(jobId)).sort()).toEqual([liveId, archivedId].sort());
  });

  it("a step run again after its read reached one shard and failed on the next: a receipt deleted or moved in between is in the file, once", async () => {
    const caller = await newCaller();
    const shopper = uniqueId("shopper");
    const first = SHARDS[0]!;
    // Receipts land where placement puts them: enough that two are on the shard a step reads first.
    const all: string[] = [];
    while (all.filter((id) => shardOfId(SHARDS, id) === first).length < 2) all.push(await add(caller, shopper));
    const [deleted, moved] = all.filter((id) => shardOfId(SHARDS, id) === first);
    const present = new Set(all.filter((id) => id !== deleted));
    // The first attempt of the receipts' first step reads the first shard's page, then fails on the
    // second shard, as a D1 fault would; a Workflow runs the step again, after a delete and a move.
    let failing = false;
    let failed = 0;
    const shards = jobShards().map((shard, i) =>
      i === 1
        ? {
            ...shard,
            run: async (statements: Parameters<JobShard["run"]>[0]) => {
              if (failing) throw new Error("D1_ERROR: injected");
              return shard.run(statements);
            },
          }
        : shard,
    );
    const retrying: StepRunner = async (name, work) => {
      if (!name.startsWith("receipts ") || failed > 0) return work();
      failing = true;
      await expect(work()).rejects.toThrow("injected");
      failing = false;
      failed += 1;
      await remove(caller, shopper, deleted!);
      await archiveReceipt(moved!);
      return work();
    };
    const jobId = uniqueId("export");
    await exportAppUser({ id: shopper, job_id: jobId }, shards, HASH_KEY, env.ARCHIVE, { steps: retrying, settle: async () => undefined });
    expect(failed, "the step failed once").toBe(1);
    const ids = await exportedIds(jobId);
    expect(ids.length, "each receipt once").toBe(new Set(ids).size);
    expect(new Set(ids)).toEqual(new Set([...present, deleted]));
  });
});
