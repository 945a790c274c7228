/**
 * The requests a bench run makes as a till: its login, and the headers of add and delete
 * (docs/api.md#login, docs/api.md#add, docs/api.md#delete).
 */
import type { HarnessClient } from "../harness/miniflare.ts";
import { PATHS } from "../src/shared/paths.ts";
import { POS_SCOPE } from "../src/shared/types.ts";
import type { Runtime } from "./runtime.ts";

/** The app user every bench receipt is for. */
export const APP_USER = "app-user-0001";

/** Logs the client in on the API Worker and returns its access token. */
export async function logIn(runtime: Runtime, client: HarnessClient): Promise<string> {
  const response = await fetch(runtime.urls.api + PATHS.login, { method: "POST", headers: loginHeaders(client) });
  const body = (await response.json()) as { data?: { access_token?: string } };
  if (!body.data?.access_token) throw new Error(`Bench login failed (${response.status}): ${JSON.stringify(body)}`);
  return body.data.access_token;
}

/** The four headers of login. */
export function loginHeaders(client: HarnessClient): Record<string, string> {
  return { client_id: client.clientId, client_secret: client.secret, token_type: "Bearer", scope: POS_SCOPE };
}

/** The headers add and delete share, less receipt_id. */
export function tokenHeaders(client: HarnessClient, token: string): Record<string, string> {
  return { authorization: `Bearer ${token}`, client_id: client.clientId, chain_id: client.chainId, app_user_id: APP_USER };
}

/** add's headers, less its Idempotency-Key. */
export function addHeaders(client: HarnessClient, token: string): Record<string, string> {
  return { ...tokenHeaders(client, token), "content-type": "application/json" };
}
