/** POST /receipts/v2/login (docs/api.md#login, #login-errors; docs/api.md#login). */
import type { LoginResponse } from "../../shared/schemas.ts";
import { SERVICE_SCOPES } from "../../shared/types.ts";
import { readClientRecord, tokensValidAfter } from "../auth/clients.ts";
import { secretMatches } from "../auth/secret-match.ts";
import { TOKEN_LIFETIME_SECONDS, issueAccessToken } from "../auth/tokens.ts";
import type { RouteContext } from "../context.ts";
import { jsonResponse } from "../responses.ts";
import { REFUSALS, refuse } from "../refusals.ts";

/**
 * Trades a client's credentials for a one-hour Bearer token of the scope asked for: one of the
 * service's scopes, and among the client record's.
 */
export async function login(c: RouteContext<"login">): Promise<Response> {
  const { headers } = c.var;
  if (headers.token_type !== "Bearer") {
    throw refuse(REFUSALS.loginTokenType, "token_type");
  }
  if (!SERVICE_SCOPES.includes(headers.scope)) {
    throw refuse(REFUSALS.loginScope, "scope value");
  }

  const record = await readClientRecord(c.env.CLIENTS, headers.client_id);
  if (!(await secretMatches(headers.client_secret, record?.secret_hash)) || !record) {
    const { success } = await c.env.LOGIN_LIMITER.limit({ key: headers.client_id });
    if (!success) {
      throw refuse(REFUSALS.tooManyLogins, "failed-login limit");
    }
    // One answer for an unknown client and a wrong secret: login must not reveal which exists.
    throw refuse(REFUSALS.loginCredentials, record ? "wrong secret" : "unknown client");
  }
  if (record.disabled) throw refuse(REFUSALS.loginDisabled, "disabled");
  if (!record.scopes.includes(headers.scope)) {
    throw refuse(REFUSALS.loginScopeNotGranted, "scope not granted");
  }

  const token = await issueAccessToken(c.get("config"), record.client_id, headers.scope, tokensValidAfter(record));
  const body: LoginResponse = {
    data: { access_token: token, expires_in: TOKEN_LIFETIME_SECONDS, token_type: "Bearer" },
    status: "OK",
    status_code: 200,
  };
  return jsonResponse(body, 200);
}
