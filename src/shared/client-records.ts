/**
 * How a client record comes to be: the one recipe that `npm run clients -- issue`, the tests and
 * the bench all follow, so a field added to the record is added everywhere at once.
 */
import { hashClientSecret, makeClientSecret } from "./secrets.ts";
import { POS_SCOPE, type ClientRecord } from "./types.ts";

/** What an issuer chooses about a new client; the rest is made here. */
export interface NewClient {
  client_id: string;
  chains: readonly string[];
  /** Defaults to the POS scope, the only one the service knows. */
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
