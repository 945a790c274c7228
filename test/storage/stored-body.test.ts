/**
 * docs/storage.md "receipts": a receipt's texts stored deflated (migration 0022,
 * src/storage/stored-body.ts), and every reader giving them back byte for byte as the till sent
 * them: the push's claim, the event feed, an export, the archive's move and the feed after it.
 * A row stored before the migration (its texts in `body` and `mapped`, as a Worker of the version
 * before still writes them through the view receipt_format_adds) is read as it always was.
 */
import { env } from "cloudflare:workers";
import { v7 as uuidv7 } from "uuid";
import { describe, expect, it } from "vitest";
import { parseAuditHashKey } from "../../src/shared/audit-hash-key.ts";
import type { AddResponse } from "../../src/shared/schemas.ts";
import { idOnShard } from "../../src/shared/shard-ids.ts";
import type { CreationNotice } from "../../src/shared/types.ts";
import { archiveObjectKey } from "../../src/storage/archive/layout.ts";
import { archiveShard } from "../../src/storage/archive/move.ts";
import { exportAppUser, exportPrefix } from "../../src/storage/export.ts";
import { claimEvents, readFeed, settleEvents } from "../../src/storage/outbox/operations.ts";
import { pushedEvent } from "../../src/storage/outbox/pushed-event.ts";
import { eventColumns } from "../../src/storage/outbox/statements.ts";
import { storeReceipt, type FencedReceipt } from "../../src/storage/receipts.ts";
import { runBatch, statement } from "../../src/storage/statement.ts";
import type { JobShard } from "../../src/storage/steps.ts";
import { inflated } from "../../src/storage/stored-body.ts";
import { uniqueId } from "../support/api.ts";
import { archivedLines } from "../support/archive.ts";
import { TEST_AUDIT_HASH_KEY } from "../support/keys.ts";
import { SHARDS, rawReceipt } from "../support/shards.ts";
import { testUserKey } from "../support/user-keys.ts";

const HASH_KEY = parseAuditHashKey(TEST_AUDIT_HASH_KEY);
const shard = SHARDS[0]!;
const jobShard: JobShard = { ...shard, run: async (statements) => (await runBatch(shard.db, statements)).map(({ results }) => results) };

// Texts with what a byte-for-byte reader must keep: spacing, escapes, characters beyond ASCII.
const BODY = '{ "total": 1,\t"note": "caf\\u00e9 ☕ 🧾", "line_items": [] }';
const DR_BODY = '{"receipt_identifier":{"extended_number":{"value":"0042"}},  "note":"Å \\" ä"}';
const DR_MODEL = JSON.stringify({ total: 1, currency: "SEK", note: "Å \" ä" });
const DR_FORMAT = "dr-retail/v1.1";

interface Added {
  receipt: FencedReceipt;
  event: CreationNotice;
  /** The receipt as its created event and an export's line carry it. */
  pushed: string;
}

function newReceipt(dr: boolean): Added {
  // ID, event_id and created_at in one millisecond, as add makes them: the move finds a receipt's
  // created event in its ID's millisecond, and two clock readings can straddle one.
  const at = Date.now();
  const now = new Date(at).toISOString();
  const receipt: FencedReceipt = {
    receipt_id: idOnShard(uuidv7({ msecs: at }), shard),
    chain_id: "chain-stored",
    client_id: uniqueId("pos-stored"),
    app_user_id: uniqueId("au-stored"),
    body: dr ? DR_BODY : BODY,
    ...(dr && { format: { name: DR_FORMAT, mapped: DR_MODEL } }),
    created_at: now,
    user_key: "hmac-sha256:no-erasure",
  };
  const { receipt_id, app_user_id, chain_id, client_id } = receipt;
  const event: CreationNotice = { event_id: idOnShard(uuidv7({ msecs: at }), shard), type: "receipt.created", occurred_at: now, receipt_id, app_user_id, chain_id, client_id, created_at: now };
  const pushed = dr ? `${DR_MODEL},"format":"${DR_FORMAT}","original":${DR_BODY}` : BODY;
  return { receipt, event, pushed };
}

// As add stores it now: its texts deflated.
async function addDeflated(added: Added): Promise<void> {
  expect((await storeReceipt(shard, added.receipt, added.event)).kind).toBe("added");
}

// As a Worker of the version before migration 0022 stores it: through 0015's view, its texts as text.
async function addAsText({ receipt, event }: Added): Promise<void> {
  const { event_id, event_payload, event_at } = eventColumns(event);
  await runBatch(shard.db, [
    statement(
      `INSERT INTO receipt_format_adds (receipt_id, chain_id, client_id, app_user_id, body, format, mapped, created_at, event_id, event_payload, event_at)
      VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)`,
      receipt.receipt_id,
      receipt.chain_id,
      receipt.client_id,
      receipt.app_user_id,
      receipt.body,
      receipt.format?.name ?? null,
      receipt.format?.mapped ?? null,
      receipt.created_at,
      event_id,
      event_payload,
      event_at,
    ),
  ]);
}

async function fed(event: CreationNotice): Promise<string | undefined> {
  const page = await readFeed([shard], { from: event.event_id }, "~", 100);
  expect(page.found).toBe(true);
  return page.found ? page.events.find((text) => text.includes(`"event_id":"${event.event_id}"`)) : undefined;
}

async function exported(appUserId: string): Promise<string[]> {
  const jobId = uniqueId("export");
  await exportAppUser({ id: appUserId, job_id: jobId }, [jobShard], HASH_KEY, env.ARCHIVE, { steps: (_name, work) => work(), settle: async () => undefined });
  const { objects } = await env.ARCHIVE.list({ prefix: exportPrefix(jobId) });
  const texts = await Promise.all(objects.map(async ({ key }) => (await env.ARCHIVE.get(key))!.text()));
  return texts.join("").split("\n").filter((line) => line.includes('"receipt":'));
}

describe("docs/storage.md#receipts a receipt's texts are stored deflated and read back as sent", () => {
  it("add stores the body deflated and an empty text body; a DR Retail receipt's model is deflated before it, and its mapped column left NULL", async () => {
    for (const dr of [false, true]) {
      const added = newReceipt(dr);
      await addDeflated(added);
      const row = (await rawReceipt(added.receipt.receipt_id))!;
      expect(row).toMatchObject({ body: "", mapped: null, format: dr ? DR_FORMAT : null });
      const texts = new TextDecoder().decode(await inflated(row.deflated as number[]));
      expect(texts).toBe(dr ? `${DR_MODEL}\n${DR_BODY}` : BODY);
    }
  });

  it.each([
    ["stored before migration 0022, as text", addAsText],
    ["stored deflated", addDeflated],
  ] as const)("a receipt %s is pushed, fed, exported and archived byte for byte as sent, and fed after its move", async (_how, add) => {
    const receipts = [newReceipt(false), newReceipt(true)];
    for (const added of receipts) await add(added);
    const now = new Date();

    for (const { event, pushed } of receipts) {
      const [claim] = await claimEvents(shard.db, [event.event_id], now, 60_000);
      expect(claim).toMatchObject({ status: "claimed", body: pushed });
      await settleEvents(shard.db, { delivered: [event.event_id], failed: [] }, now);
      expect(await fed(event)).toBe(pushedEvent(JSON.stringify(event), pushed));
    }
    for (const { receipt, pushed } of receipts) {
      const lines = await exported(receipt.app_user_id);
      expect(lines).toHaveLength(1);
      expect(lines[0]!.endsWith(`,"receipt":${pushed}}`)).toBe(true);
    }

    await archiveShard(jobShard, env.ARCHIVE, HASH_KEY, { runId: uniqueId("run"), archiveAfterMs: 0 });
    for (const { receipt, event, pushed } of receipts) {
      expect(await rawReceipt(receipt.receipt_id)).toBeNull();
      const key = archiveObjectKey(await testUserKey(receipt.app_user_id), receipt.chain_id, receipt.receipt_id, shard.name);
      const [line] = await archivedLines(key);
      expect(line).toMatchObject({ receipt_id: receipt.receipt_id, body: receipt.body });
      expect(line!.format ?? null).toBe(receipt.format?.name ?? null);
      expect(line!.mapped ?? null).toBe(receipt.format?.mapped ?? null);
      // Its created event is still in the outbox: the move kept the receipt there for the feed.
      expect(await fed(event)).toBe(pushedEvent(JSON.stringify(event), pushed));
    }
  });
});
