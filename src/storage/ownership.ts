/**
 * The condition every write of a live delete carries (docs/api.md#delete): the receipt is there
 * with the request's client_id, chain_id and app_user_id, and no erasure's fence of that app user
 * covers it. The receipt's removal, its event and its audit record each carry it, so that they
 * go together or not at all; an archived receipt's delete carries its twin
 * (src/storage/archive/owners.ts `archivedOwned`). This file stays free of Workers types.
 */
import { fenced } from "./fences.ts";

/** The placeholders of an owner's condition, in the statement it goes in. */
export interface OwnerParams {
  receiptId: string;
  clientId: string;
  chainId: string;
  appUserId: string;
  /** The app user's pseudonym, which names them in erasure fences. */
  userKey: string;
}

/**
 * An SQL expression, 1 while the live receipt exists with these fields and no fence of its app
 * user stands at or after its created_at: a receipt an erasure is on its way to is as good as
 * erased, and its delete must leave no event or audit record naming the app user.
 */
export function liveOwned(p: OwnerParams): string {
  return `EXISTS (SELECT 1 FROM receipts WHERE receipt_id = ${p.receiptId} AND client_id = ${p.clientId}
    AND chain_id = ${p.chainId} AND app_user_id = ${p.appUserId} AND NOT ${fenced(p.userKey, "receipts.created_at")})`;
}
