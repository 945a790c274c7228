/** POST /receipts/v2/add (docs/api.md#add). */
import { addHeaders, receiptBody } from "../../shared/schemas.ts";
import { logLine } from "../../shared/log.ts";
import { NoOpenShardError, placeAndStore } from "../../storage/placement.ts";
import { authenticateClient } from "../auth/bearer.ts";
import { readJsonBody } from "../body.ts";
import type { ApiContext } from "../context.ts";
import { enqueueNotice, newCreationNotice } from "../events.ts";
import { readHeaders } from "../headers.ts";
import { REFUSALS, refuse } from "../refusals.ts";
import { jsonResponse } from "../responses.ts";
import { userKeyOf } from "../user-key.ts";

/**
 * Stores a receipt for an app user. Checks run cheapest and least revealing first: headers,
 * then who is calling and for which chain, and only then is the body read (docs/api.md "add").
 */
export async function add(c: ApiContext): Promise<Response> {
  const headers = readHeaders(c.req.raw, addHeaders);
  c.set("clientId", headers.client_id);
  const client = await authenticateClient(c, { authorization: headers.Authorization, client_id: headers.client_id });
  if (!client.chains.includes(headers.chain_id)) {
    throw refuse(REFUSALS.chainNotAllowed, "chain not among the client's chains");
  }
  const body = await readJsonBody(c.req.raw, headers["Content-Type"], receiptBody, c.get("config").bodyDeadlineMs);

  const waitUntil = (work: Promise<unknown>) => c.executionCtx.waitUntil(work);
  const config = c.get("config");
  const user_key = await userKeyOf(c.get("isolate"), config, headers.app_user_id);
  const stored = await placeAndStore(
    { env: c.env, settings: config, memory: c.get("isolate").placement, waitUntil },
    { chain_id: headers.chain_id, client_id: client.client_id, app_user_id: headers.app_user_id, body, user_key },
    headers["Idempotency-Key"],
    newCreationNotice,
  ).catch(noOpenShardRefused);
  if (stored.kind === "conflict") {
    throw refuse(REFUSALS.idempotencyConflict, "idempotency key reused for a different request");
  }
  if (stored.kind === "added") {
    c.set("shard", stored.shard.name);
    waitUntil(enqueueNotice(c.env, stored.event));
  }
  return jsonResponse(stored.response, 200);
}

// Every shard closed is the operator's to fix, not the till's: a 503 it retries, and a line of
// its own that an alert matches, besides the request line.
function noOpenShardRefused(error: unknown): never {
  if (!(error instanceof NoOpenShardError)) throw error;
  logLine("error", "no-open-shard", { outcome: "add refused: every shard is closed; open or add a shard" });
  throw refuse(REFUSALS.noOpenShard, error.message);
}
