/** POST /receipts/v2/login (seed §4.1, §7.1; contract §2). */
import { loginHeaders, type LoginResponse } from "../../shared/schemas.ts";
import { POS_SCOPE } from "../../shared/types.ts";
import { readClientRecord } from "../auth/clients.ts";
import { secretMatches } from "../auth/secrets.ts";
import { TOKEN_LIFETIME_SECONDS, issueAccessToken } from "../auth/tokens.ts";
import type { ApiContext } from "../context.ts";
import { ApiError, jsonResponse } from "../errors.ts";
import { readHeaders } from "../headers.ts";

// Seed §7.1 keeps login's 403 status word at "Not Acceptable"; deployed clients match on it.
const LOGIN_403_WORD = "Not Acceptable";

/** How long a client that failed too often waits, matching the limiter's period in wrangler.toml. */
const RETRY_AFTER_SECONDS = 60;

/** Trades a client's credentials for a one-hour Bearer token. */
export async function login(c: ApiContext): Promise<Response> {
  const headers = readHeaders(c.req.raw, loginHeaders);
  c.set("clientId", headers.client_id);
  if (headers.token_type !== "Bearer") {
    throw loginRefusal("Header token_type must be Bearer.", "token_type");
  }
  if (headers.scope !== POS_SCOPE) {
    throw loginRefusal(`Header scope must be ${POS_SCOPE}.`, "scope value");
  }

  const record = await readClientRecord(c.env.CLIENTS, headers.client_id);
  if (!(await secretMatches(headers.client_secret, record?.secret_hash)) || !record) {
    const { success } = await c.env.LOGIN_LIMITER.limit({ key: headers.client_id });
    if (!success) {
      throw new ApiError(429, "Too many failed logins for header client_id; wait before trying again.", {
        headers: { "retry-after": String(RETRY_AFTER_SECONDS) },
        cause: "failed-login limit",
      });
    }
    // One answer for an unknown client and a wrong secret: login must not reveal which exists.
    throw loginRefusal(
      "Headers client_id and client_secret do not match a client issued by the operator.",
      record ? "wrong secret" : "unknown client",
    );
  }
  if (record.disabled) throw loginRefusal("Header client_id names a disabled client.", "disabled");
  if (!record.scopes.includes(headers.scope)) {
    throw loginRefusal(`Header scope ${POS_SCOPE} is not granted to this client.`, "scope not granted");
  }

  const token = await issueAccessToken(c.get("config"), record.client_id, headers.scope);
  const body: LoginResponse = {
    data: { access_token: token, expires_in: TOKEN_LIFETIME_SECONDS, token_type: "Bearer" },
    status: "OK",
    status_code: 200,
  };
  return jsonResponse(body, 200);
}

function loginRefusal(detail: string, cause: string): ApiError {
  return new ApiError(403, detail, { statusWord: LOGIN_403_WORD, cause });
}
