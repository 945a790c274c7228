/**
 * Authenticates a token-bearing request (add, delete, the event feed) in the order docs/api.md#delete fixes: the token,
 * then the client it claims to act for, then that the two belong together and that the client
 * has not revoked the token since (docs/api.md#revocation).
 */
import { APP_SCOPE, OPS_SCOPE, POS_SCOPE, type ClientRecord } from "../../shared/types.ts";
import type { ApiContext } from "../context.ts";
import { REFUSALS, refuse } from "../refusals.ts";
import { cachedClientRecord, tokensValidAfter } from "./clients.ts";
import { verifyAccessToken } from "./tokens.ts";

// RFC 6750 reads the scheme name case-insensitively; docs/api.md writes it as "Bearer".
const BEARER = /^Bearer +([^\s]+)$/i;

// A token of the other scope is refused naming Authorization, like any token not good here.
const WRONG_SCOPE = { [POS_SCOPE]: REFUSALS.posScope, [APP_SCOPE]: REFUSALS.appScope, [OPS_SCOPE]: REFUSALS.opsScope } as const;

/**
 * Returns the record of the client that `client_id` names, once the Bearer token in
 * `authorization` is valid, unexpired, of `scope` (the POS scope for add and delete, the app
 * scope for the event feed, the ops scope for the status) and issued to that very client.
 * Every refusal is a 403 (docs/api.md#delete-errors).
 */
export async function authenticateClient(
  c: ApiContext,
  headers: { authorization: string; client_id: string },
  scope: keyof typeof WRONG_SCOPE = POS_SCOPE,
): Promise<ClientRecord> {
  const config = c.get("config");
  const token = BEARER.exec(headers.authorization)?.[1];
  if (!token) {
    throw refuse(REFUSALS.notBearer, "no Bearer scheme");
  }
  const check = await verifyAccessToken(config, token);
  if (!check.ok) {
    throw check.reason === "expired"
      ? refuse(REFUSALS.tokenExpired, "token expired")
      : refuse(REFUSALS.tokenInvalid, check.cause);
  }
  if (check.claims.scope !== scope) {
    throw refuse(WRONG_SCOPE[scope], "token scope");
  }

  const record = await cachedClientRecord(c.env.CLIENTS, c.get("isolate").clients, headers.client_id, config.clientCacheMs, check.claims.iat);
  if (!record) throw refuse(REFUSALS.unknownClient, "unknown client");
  if (record.disabled) throw refuse(REFUSALS.disabledClient, "disabled client");
  if (check.claims.sub !== record.client_id) {
    throw refuse(REFUSALS.otherClient, "token subject differs from client_id");
  }
  // At least, not equal: a login where KV already showed a newer record issued this token, and
  // this location will show that record within the KV bound; until then its copy is older.
  if (!((check.claims.epoch ?? 0) >= tokensValidAfter(record))) throw refuse(REFUSALS.tokenRevoked, "token revoked");
  return record;
}
