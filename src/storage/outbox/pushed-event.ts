/**
 * An event as the app push service gets it, pushed or read from the event feed: the outbox keeps
 * a created event without its receipt, which is spliced in from the receipt's own row. Kept free
 * of Workers types: both Workers share it.
 */

/**
 * The event's JSON text as the app gets it: `payload` as the outbox stores it, with `receipt`
 * added when `receiptBody` is given, as text, so that the app gets exactly the bytes add stored.
 * For a receipt in a published format, `receiptBody` holds its model and then its `format` and
 * `original` members (src/storage/stored-body.ts `receiptAsPushed`).
 *
 * @example pushedEvent('{"type":"receipt.created"}', '{"total":1}') // '{"type":"receipt.created","receipt":{"total":1}}'
 */
export function pushedEvent(payload: string, receiptBody: string | null): string {
  return receiptBody === null ? payload : `${payload.slice(0, -1)},"receipt":${receiptBody}}`;
}
