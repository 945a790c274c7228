/**
 * docs/storage.md#archive: an archive object is stored deflated, marked so by its custom
 * metadata, and one written before in plain text still reads and is deflated at its next rewrite.
 */
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { archiveText, type ArchivedReceipt } from "../../../src/storage/archive/layout.ts";
import { ENCODING, readObject, readReceipts, rewriteObject } from "../../../src/storage/archive/objects.ts";
import { uniqueId } from "../../support/api.ts";

function receipt(n: number): ArchivedReceipt {
  const id = `019aa8a4-0000-7000-9000-${String(n).padStart(12, "0")}`;
  return { receipt_id: id, chain_id: "chain-1", client_id: "pos-1", app_user_id: "shopper-1", created_at: "2026-06-01T00:00:00.000Z", body: JSON.stringify({ n, lines: "item ".repeat(200) }) };
}

describe("docs/storage.md#archive objects stored deflated", () => {
  it("a written object is raw deflate, marked by its custom metadata, smaller than its text, and reads back as its receipts", async () => {
    const key = `users/${uniqueId("objects")}/chain-1/2026-06/s0.ndjson`;
    const receipts = [receipt(1), receipt(2)];
    await rewriteObject(env.ARCHIVE, key, () => receipts);
    const stored = (await env.ARCHIVE.get(key))!;
    const bytes = new Uint8Array(await stored.arrayBuffer());
    expect(stored.customMetadata).toEqual(ENCODING);
    expect(bytes.byteLength).toBeLessThan(new TextEncoder().encode(archiveText(receipts)).byteLength / 4);
    const inflated = await new Response(new Blob([bytes]).stream().pipeThrough(new DecompressionStream("deflate-raw"))).text();
    expect(inflated).toBe(archiveText(receipts));
    expect(await readReceipts(env.ARCHIVE, key)).toEqual(receipts);
  });

  it("an object written before in plain text reads as it is, and a rewrite stores it deflated with the new line", async () => {
    const key = `users/${uniqueId("objects")}/chain-1/2026-06/s0.ndjson`;
    await env.ARCHIVE.put(key, archiveText([receipt(1)]));
    expect(await readReceipts(env.ARCHIVE, key)).toEqual([receipt(1)]);
    await rewriteObject(env.ARCHIVE, key, (held) => [...held, receipt(2)]);
    expect((await env.ARCHIVE.get(key))!.customMetadata).toEqual(ENCODING);
    expect((await readObject(env.ARCHIVE, key)).text).toBe(archiveText([receipt(1), receipt(2)]));
  });

  it("an absent object reads as none", async () => {
    expect(await readReceipts(env.ARCHIVE, `users/${uniqueId("objects")}/chain-1/2026-06/s0.ndjson`)).toBeNull();
  });
});
