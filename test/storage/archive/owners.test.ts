/**
 * docs/storage.md#archived-owners: what the owner index adds to a shard per archived receipt,
 * measured as D1 reports the database's size (`meta.size_after`), against the keyed-fingerprint
 * form it was weighed with and the index by app user it does without.
 */
import { describe, expect, it } from "vitest";
import { recordOwners } from "../../../src/storage/archive/owners.ts";
import { runBatch, statement } from "../../../src/storage/statement.ts";
import { SHARDS, idOn } from "../../support/shards.ts";

const shard = SHARDS[0]!;
// Enough rows that a page's slack (4 KiB pages) is under one byte a receipt.
const RECEIPTS = 20_000;

// docs/scale.md's assumed lengths: client_id 16 characters, chain_id 9, app_user_id 36.
function owners(): { receipt_id: string; client_id: string; chain_id: string; app_user_id: string }[] {
  return Array.from({ length: RECEIPTS }, (_, index) => ({
    receipt_id: idOn(shard),
    client_id: `pos-${String(index % 500).padStart(12, "0")}`,
    chain_id: `chain-${String(index % 100).padStart(3, "0")}`,
    app_user_id: crypto.randomUUID(),
  }));
}

async function sizeAfter(sql: string, ...values: string[]): Promise<number> {
  return (await shard.db.prepare(sql).bind(...values).run()).meta.size_after;
}

describe("docs/storage.md#archived-owners bytes per archived receipt", () => {
  it("the owner rows the move records: about 120 bytes a receipt, plain fields against keyed fingerprints", async () => {
    const page = JSON.stringify(owners());
    await sizeAfter(
      `INSERT INTO receipts (receipt_id, chain_id, client_id, app_user_id, body, created_at)
      SELECT value ->> 'receipt_id', value ->> 'chain_id', value ->> 'client_id', value ->> 'app_user_id', '{}', '2026-01-01T00:00:00.000Z'
      FROM json_each(?1)`,
      page,
    );
    const before = await sizeAfter("SELECT 1");
    const ids = statement("SELECT value ->> 'receipt_id' FROM json_each(?1)", page);
    const [recorded] = await runBatch(shard.db, [recordOwners(ids)]);
    expect(recorded!.meta.changes).toBe(RECEIPTS);
    const plain = (recorded!.meta.size_after - before) / RECEIPTS;

    // What an erasure would need to find the rows by app user instead of by the lines it reads.
    const withIndex = await sizeAfter("CREATE INDEX archived_owners_by_app_user ON archived_owners (app_user_id)");
    const byAppUser = (withIndex - recorded!.meta.size_after) / RECEIPTS;
    await sizeAfter("DROP INDEX archived_owners_by_app_user");

    // The alternative: receipt_id as the key, each other field an 8-byte keyed fingerprint.
    await sizeAfter("CREATE TABLE owner_fingerprints (receipt_id TEXT PRIMARY KEY, client BLOB, chain BLOB, app_user BLOB) STRICT, WITHOUT ROWID");
    const beforeFingerprints = await sizeAfter("SELECT 1");
    const afterFingerprints = await sizeAfter(
      "INSERT INTO owner_fingerprints SELECT value ->> 'receipt_id', randomblob(8), randomblob(8), randomblob(8) FROM json_each(?1)",
      page,
    );
    const fingerprints = (afterFingerprints - beforeFingerprints) / RECEIPTS;
    await sizeAfter("DROP TABLE owner_fingerprints");

    console.info(
      `archived_owners: ${RECEIPTS} receipts, ${plain.toFixed(1)} bytes each as plain fields, ` +
        `${byAppUser.toFixed(1)} more with an index by app_user_id, ${fingerprints.toFixed(1)} as keyed 8-byte fingerprints`,
    );
    expect(plain).toBeLessThan(130);
    expect(fingerprints).toBeLessThan(plain);
  }, 60_000);
});
