/**
 * How a client record comes to be, and how `rotate` and `disable` revoke its tokens: the one
 * recipe that `npm run clients`, the tests and the bench all follow, so a field added to the
 * record is added everywhere at once.
 */
import { hashClientSecret, makeClientSecret } from "./secrets.ts";
import { POS_SCOPE, type ClientRecord } from "./types.ts";

/** What an issuer chooses about a new client; the rest is made here. */
export interface NewClient {
  client_id: string;
  chains: readonly string[];
  /** Defaults to the POS scope; the app push service's client has the app scope alone. */
  scopes?: readonly string[];
  disabled?: boolean;
}

/**
 * A new client record and its secret, which is returned to be shown once and never stored.
 *
 * @example const { record, secret } = await newClientRecord({ client_id: "pos-1", chains: ["c1"] });
 */
export async function newClientRecord(
  client: NewClient,
  now = new Date(),
): Promise<{ record: ClientRecord; secret: string }> {
  const secret = makeClientSecret();
  const at = now.toISOString();
  const record: ClientRecord = {
    client_id: client.client_id,
    secret_hash: await hashClientSecret(secret),
    chains: [...new Set(client.chains)],
    scopes: [...(client.scopes ?? [POS_SCOPE])],
    disabled: client.disabled ?? false,
    created_at: at,
    updated_at: at,
  };
  return { record, secret };
}

/**
 * The record with every token issued so far revoked, as `rotate` and `disable` store it. The time
 * only ever moves forward, even if the operator's clock went back: a token carries the value it
 * was issued under, and a later value must never compare as older.
 */
export function revokingIssuedTokens(record: ClientRecord, now = new Date()): ClientRecord {
  const previous = record.tokens_valid_after ? Date.parse(record.tokens_valid_after) : 0;
  const validAfter = new Date(Math.max(now.getTime(), previous + 1));
  return { ...record, tokens_valid_after: validAfter.toISOString(), updated_at: now.toISOString() };
}
