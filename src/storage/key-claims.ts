/**
 * An Idempotency-Key across shards (docs/storage.md "One key, one receipt"): the claims an add
 * makes ahead on other shards than its target, the answer of another call's record found there
 * and the receipt a replay makes good where that record's ID says, crossed claims settled on the
 * way (docs/storage.md "Crossed claims"). Only an add whose key meets a shard opened or closed
 * within the idempotency window, or a retry that finds such a claim, comes here; the common add is
 * src/storage/receipts.ts `storeOn`, one batch.
 */
import type { AddResponse } from "../shared/schemas.ts";
import { shardOfId } from "../shared/shard-ids.ts";
import { claimKey, idempotencyCutoff, keyRecordOf, receiptOn, replayOf, storeReceipt, type Add, type KeyRecord, type Stored } from "./receipts.ts";
import type { Shard } from "./shards.ts";
import { statement, type Statement } from "./statement.ts";
import { isLateEventCommit, runOnShard } from "./transient.ts";

/**
 * With no open target: the answer of the key's earlier add, from the first planned shard that
 * holds a live record of it, or undefined.
 */
export async function earlierAnswer(add: Add): Promise<Stored | undefined> {
  const { keyed } = add.plan;
  for (const shard of keyed?.ahead ?? []) {
    const [read] = await runOnShard(shard, [readKey(add.receipt.client_id, keyed!.key, new Date())]);
    const record = read!.results[0] as KeyRecord | undefined;
    if (record) return answerOf(add, record, shard);
  }
  return undefined;
}

/**
 * Claims the key for `own` on each shard `ahead`, in the key's order, before the target: a shard
 * of the key's order other than the target opened or closed within the idempotency window, so a
 * call of this key in an isolate that read the states on the other side of that change may go
 * there instead. Each claim is a write, which D1 runs one at a time with the other call's on that
 * shard, so the first to claim wins there and the other finds its record: its answer, or
 * undefined where every claim is this call's.
 */
export async function claimAhead(add: Add, own: ReturnType<typeof receiptOn>, ahead: readonly Shard[]): Promise<Stored | undefined> {
  for (const shard of ahead) {
    const [claimed] = await runOnShard(shard, [claimKey(own.row, own.claim!, { keepUser: false })]);
    const record = keyRecordOf(claimed!);
    if (record.receipt_id !== own.row.receipt_id) return answerOf(add, record, shard);
  }
  return undefined;
}

/**
 * How many shards a replay follows claims made ahead across: the shard the receipt's ID names, and
 * once more after two crossed claims were settled there.
 */
const MAX_CLAIM_HOPS = 2;

/**
 * The answer of the call that recorded the key first, its record found on `where`: a conflict for
 * another request; else its first answer, once that answer's receipt is stored. A live record on
 * another shard than the one its receipt's ID names was claimed ahead by a call that may have
 * stopped before it stored the receipt: it is stored there as that call would have (only where
 * that shard holds no live record of the key, so never twice and never again after a delete), and
 * the answer is what that shard's record says (docs/storage.md "Making a claim good"). Where the
 * two shards each hold the other call's claim, the claim on the shard ranked first in the key's
 * order wins, the same in every isolate, and the other gives way to its receipt
 * (docs/storage.md "Crossed claims").
 */
export async function answerOf(add: Add, found: KeyRecord, where: Shard): Promise<Stored> {
  const { shards, keyed } = add.plan;
  let [record, on] = [found, where];
  for (let hops = 0; ; hops += 1) {
    if (record.fingerprint !== keyed!.fingerprint) return { kind: "conflict" };
    const replay = replayOf(record, add.receipt.app_user_id);
    const holder = shardOfId(shards, record.receipt_id);
    if (record.erased_at !== null || !holder || holder === on) return replay;
    if (hops >= MAX_CLAIM_HOPS) throw new Error("the key's claims made ahead lead on past the shard its receipt names; nothing stored");
    const data = { ...replay.response.data, app_user_id: add.receipt.app_user_id };
    const made = await storeOrOwn(add, holder, data);
    const crossed = made.receipt_id !== data.receipt_id && made.erased_at === null && made.fingerprint === keyed!.fingerprint && shardOfId(shards, made.receipt_id) === on;
    if (!crossed) {
      [record, on] = [made, holder];
      continue;
    }
    const [winner, loser] =
      shards.indexOf(on) < shards.indexOf(holder)
        ? [data, { receiptId: made.receipt_id, on: holder }]
        : [replayOf(made, add.receipt.app_user_id).response.data, { receiptId: data.receipt_id, on }];
    [record, on] = [await storeOrOwn(add, loser.on, winner, loser.receiptId), loser.on];
  }
}

/**
 * Stores the receipt `data` names on `holder`, the key claimed ahead ({@link storeReceipt}), and
 * returns the key's record there. Its event would commit too late for the feed (migration 0018)
 * when the claim is older than that: no call can store its receipt any more, so none was ever
 * answered with it, and this call stores a receipt of its own there instead, under the same rule:
 * whichever call's record that shard holds first is the key's answer for every call after.
 */
async function storeOrOwn(add: Add, holder: Shard, data: AddResponse["data"], givingWay?: string): Promise<KeyRecord> {
  const store = async (as?: AddResponse["data"]) => {
    const { row, claim, event } = receiptOn(add, holder, as);
    return (await storeReceipt(holder, row, event, { ...claim!, claimedAhead: { ...(givingWay !== undefined && { givingWay }) } })).record!;
  };
  try {
    return await store(data);
  } catch (error) {
    if (!isLateEventCommit(error)) throw error;
    return store();
  }
}

// A key's record, only one still live at `now`.
function readKey(clientId: string, key: string, now: Date): Statement {
  return statement(
    `SELECT receipt_id, fingerprint, response, erased_at FROM idempotency_keys
    WHERE client_id = ?1 AND idempotency_key = ?2 AND created_at >= ?3`,
    clientId,
    key,
    idempotencyCutoff(now),
  );
}
