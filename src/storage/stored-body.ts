/**
 * A receipt's texts as its row stores them (migration 0022): add deflates the body, and for a
 * receipt in a published format (docs/api.md#dr-retail) its model before it, into one BLOB,
 * `deflated`, with `deflate-raw`, and leaves `body` empty and `mapped` NULL. A row written before
 * (or by a Worker of the version before) keeps both as text, with `deflated` NULL. Every reader
 * gets the texts back through {@link storedTexts}, byte for byte as the till sent them.
 *
 * Deflated together, the model and the original share their words: the bench's DR Retail receipt
 * of 2,177 bytes and its model of 889 take 836 bytes so, 995 apart. The model is JSON that
 * JSON.stringify wrote, which holds no line feed, so the first line feed ends it.
 *
 * The compression is ./deflate.ts's, which Node has too: the soak, the scripts and the tests read a
 * shard's rows as the Workers do. This file stays free of Workers types.
 */
import { deflateRaw, inflateRaw } from "./deflate.ts";

/** A receipt's texts as the till sent them: the body, and for a published format its model. */
export interface ReceiptTexts {
  body: string;
  /** The receipt in our model, for a receipt added in a published format; else null. */
  mapped: string | null;
}

/**
 * A receipt's stored columns as D1 hands them back: a BLOB is an array of its bytes there, a
 * Uint8Array in node:sqlite.
 */
export interface StoredColumns {
  body: string;
  format: string | null;
  mapped: string | null;
  deflated: StoredBytes | null;
}

/** A BLOB as a driver reads it. */
export type StoredBytes = ArrayBuffer | Uint8Array | readonly number[];

/** The receipt columns {@link StoredColumns} names, for a SELECT list. */
export const STORED_COLUMNS = ["body", "format", "mapped", "deflated"] as const;

/**
 * What add stores of `texts`: the body, after the model and a line feed where there is one,
 * deflated.
 *
 * @example await deflatedTexts({ body: '{"total":1}', mapped: null }) // Uint8Array of deflate-raw
 */
export async function deflatedTexts(texts: ReceiptTexts): Promise<Uint8Array> {
  const joined = texts.mapped === null ? texts.body : `${texts.mapped}\n${texts.body}`;
  return deflateRaw(new TextEncoder().encode(joined));
}

/** The texts a stored row holds, inflated where add deflated them. */
export async function storedTexts(row: StoredColumns): Promise<ReceiptTexts> {
  if (row.deflated === null) return { body: row.body, mapped: row.mapped };
  const joined = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true }).decode(await inflated(row.deflated));
  if (row.format === null) return { body: joined, mapped: null };
  const end = joined.indexOf("\n");
  return { body: joined.slice(end + 1), mapped: joined.slice(0, end) };
}

/**
 * What a created event carries of its receipt, as JSON members after `"receipt":`
 * (./outbox/pushed-event.ts): the body of a receipt in our shape; for one in a published format
 * its model, then `format` and `original`, the body as the till sent it. The push's claim, the
 * event feed and the archive's move (for the copy the feed reads once the row is gone) make it
 * from the row they read.
 */
export async function receiptAsPushed(row: StoredColumns): Promise<string> {
  const { body, mapped } = await storedTexts(row);
  return row.format === null ? body : `${mapped},"format":${JSON.stringify(row.format)},"original":${body}`;
}

/** The bytes of a BLOB that `deflate-raw` wrote, inflated. */
export function inflated(bytes: StoredBytes): Promise<Uint8Array> {
  return inflateRaw(bytes instanceof Uint8Array ? bytes : new Uint8Array(bytes as ArrayBuffer | readonly number[]));
}
