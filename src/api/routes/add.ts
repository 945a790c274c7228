/** POST /receipts/v2/add (docs/api.md#add). */
import { base64url } from "jose";
import { v7 as uuidv7 } from "uuid";
import { addHeaders, receiptBody, type AddHeaders, type AddResponse } from "../../shared/schemas.ts";
import type { CreationNotice } from "../../shared/types.ts";
import {
  earlierAdd,
  storeReceipt,
  type AddOutcome,
  type IdempotencyClaim,
  type StoredReceipt,
} from "../../storage/receipts.ts";
import { shardStates } from "../../storage/shard-states.ts";
import { failingShards, idOnShard, noteShardFailure, placeReceipt, shardsOf, type Shard } from "../../storage/shards.ts";
import { authenticateClient } from "../auth/bearer.ts";
import { readJsonBody } from "../body.ts";
import type { ApiContext } from "../context.ts";
import { jsonResponse } from "../responses.ts";
import { readHeaders } from "../headers.ts";
import { enqueueNotice, newCreationNotice } from "../events.ts";
import { checkShardFill } from "../shard-fill.ts";
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
  const text = await readJsonBody(c.req.raw, headers["Content-Type"], receiptBody, c.get("config").bodyDeadlineMs);

  // One clock reading for both: the ID's time is created_at (docs/api.md), also when the clock
  // moves on between two readings.
  const now = Date.now();
  const key = headers["Idempotency-Key"];
  const shards = shardsOf(c.env);
  const states = await shardStates(c.env.SHARD_STATES, shards, c.get("config").shardStatesMs, now);
  const placement = placeReceipt(shards, states, { key, now, failing: failingShards(now) });
  if (!placement) throw new Error("no open shard: every shard is closed");
  const { target } = placement;

  const data: AddResponse["data"] = {
    receipt_id: newReceiptId(now, target),
    chain_id: headers.chain_id,
    client_id: client.client_id,
    app_user_id: headers.app_user_id,
    created_at: new Date(now).toISOString(),
  };
  const response: AddResponse = { data, status: "OK", status_code: 200 };
  const claim = key === undefined ? undefined : { key, fingerprint: await requestFingerprint(headers, text), response };
  const event = newCreationNotice(data, target);
  const outcome: AddOutcome & { sizeAfter?: number } =
    (claim && (await earlierAddElsewhere(placement.lookups, client.client_id, claim, now))) ??
    (await addOnShard(target, { ...data, body: text }, event, claim));
  if (outcome.kind === "conflict") {
    throw refuse(REFUSALS.idempotencyConflict, "idempotency key reused for a different request");
  }
  if (outcome.kind === "added") c.executionCtx.waitUntil(enqueueNotice(c.env, target, event));
  if (outcome.sizeAfter !== undefined) {
    c.executionCtx.waitUntil(
      checkShardFill(
        c.env.SHARD_STATES,
        { shard: target, bytes: outcome.sizeAfter },
        { shards, states, thresholdBytes: c.get("config").shardFillBytes, now: new Date(now) },
      ),
    );
  }
  return jsonResponse(outcome.kind === "replayed" ? outcome.response : response, 200);
}

// A shard that opened or closed within the idempotency window may hold this key's first call
// (src/storage/shards.ts); in the steady state there is none to ask.
async function earlierAddElsewhere(
  shards: readonly Shard[],
  clientId: string,
  claim: IdempotencyClaim,
  now: number,
): Promise<AddOutcome | undefined> {
  for (const shard of shards) {
    const earlier = await earlierAdd(shard.db, clientId, claim, new Date(now));
    if (earlier) return earlier;
  }
  return undefined;
}

// A shard whose call fails is passed over by this isolate for a while, so that new receipts go
// to the other open shards while it recovers.
async function addOnShard(
  shard: Shard,
  receipt: StoredReceipt,
  event: CreationNotice,
  claim: IdempotencyClaim | undefined,
): Promise<AddOutcome & { sizeAfter: number }> {
  try {
    return await storeReceipt(shard.db, receipt, event, claim);
  } catch (error) {
    noteShardFailure(shard);
    throw error;
  }
}

// UUIDv7: the time in front keeps inserts at the end of the primary key's b-tree. uuid's default
// spends 31 of the random bits on a counter within one millisecond, which makes neighbouring IDs
// partly predictable; fresh random bits for every ID keep them unguessable: the 62 of rand_b, as
// rand_a carries the shard's tag.
function newReceiptId(msecs: number, shard: Shard): string {
  return idOnShard(uuidv7({ msecs, random: crypto.getRandomValues(new Uint8Array(16)) }), shard);
}

// Everything that decides what a retry would store: the client is part of the key already, and
// Authorization changes when a token is renewed, so neither belongs here. Header values are
// printable ASCII, so a line feed separates the parts unambiguously without escaping a 40 KB body.
async function requestFingerprint(headers: AddHeaders, body: string): Promise<string> {
  const request = `${headers.chain_id}\n${headers.app_user_id}\n${body}`;
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(request));
  return base64url.encode(new Uint8Array(digest));
}
