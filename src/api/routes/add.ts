/** POST /receipts/v2/add (docs/api.md#add). */
import { base64url } from "jose";
import { v7 as uuidv7 } from "uuid";
import { addHeaders, receiptBody, type AddHeaders, type AddResponse } from "../../shared/schemas.ts";
import { addReceipt } from "../../storage/receipts.ts";
import { authenticateClient } from "../auth/bearer.ts";
import { readJsonBody } from "../body.ts";
import type { ApiContext } from "../context.ts";
import { jsonResponse } from "../responses.ts";
import { readHeaders } from "../headers.ts";
import { REFUSALS, refuse } from "../refusals.ts";

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
  const { text } = await readJsonBody(c.req.raw, headers["Content-Type"], receiptBody);

  // One clock reading for both: the ID's time is created_at (docs/api.md), also when the clock
  // moves on between two readings.
  const now = Date.now();
  const data: AddResponse["data"] = {
    receipt_id: newReceiptId(now),
    chain_id: headers.chain_id,
    client_id: client.client_id,
    app_user_id: headers.app_user_id,
    created_at: new Date(now).toISOString(),
  };
  const receipt = { ...data, body: text };
  const response: AddResponse = { data, status: "OK", status_code: 200 };
  const key = headers["Idempotency-Key"];
  const outcome = await addReceipt(
    c.env.DB,
    receipt,
    key === undefined ? undefined : { key, fingerprint: await requestFingerprint(headers, text), response },
  );
  if (outcome.kind === "conflict") {
    throw refuse(REFUSALS.idempotencyConflict, "idempotency key reused for a different request");
  }
  return jsonResponse(outcome.kind === "replayed" ? outcome.response : response, 200);
}

// UUIDv7: the time in front keeps inserts at the end of the primary key's b-tree. uuid's default
// spends 31 of the random bits on a counter within one millisecond, which makes neighbouring IDs
// partly predictable; fresh random bits for every ID keep all 73 unguessable.
function newReceiptId(msecs: number): string {
  return uuidv7({ msecs, random: crypto.getRandomValues(new Uint8Array(16)) });
}

// Everything that decides what a retry would store: the client is part of the key already, and
// Authorization changes when a token is renewed, so neither belongs here. Header values are
// printable ASCII, so a line feed separates the parts unambiguously without escaping a 40 KB body.
async function requestFingerprint(headers: AddHeaders, body: string): Promise<string> {
  const request = `${headers.chain_id}\n${headers.app_user_id}\n${body}`;
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(request));
  return base64url.encode(new Uint8Array(digest));
}
