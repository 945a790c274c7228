/** POST /receipts/v2/add (docs/api.md#add). */
import { receiptBody } from "../../shared/schemas.ts";
import { logLine } from "../../shared/log.ts";
import { DR_RETAIL_BODIES } from "../../shared/dr-retail.ts";
import { DR_RETAIL_PROFILES, drRetailFormat } from "../../shared/dr-retail-profiles.ts";
import { NoOpenShardError, placeAndStore, type NewReceipt } from "../../storage/placement.ts";
import { firstFieldRefusal, jsonMediaType, readJsonBody } from "../body.ts";
import { mapDrRetail } from "../dr-retail-mapping.ts";
import { enqueueNotice, newCreationNotice } from "../events.ts";
import type { RouteContext } from "../context.ts";
import { REFUSALS, refuse } from "../refusals.ts";
import { overloadRefused } from "../overload.ts";
import { jsonResponse } from "../responses.ts";
import { userKeyOf } from "../user-key.ts";

/**
 * Stores a receipt for an app user. Checks run cheapest and least revealing first: headers,
 * then who is calling (the route's checks, src/api/middleware.ts) and for which chain, and only then is the body read (docs/api.md "add").
 */
export async function add(c: RouteContext<"add">): Promise<Response> {
  const { headers, client } = c.var;
  if (!client.chains.includes(headers.chain_id)) {
    throw refuse(REFUSALS.chainNotAllowed, "chain not among the client's chains");
  }
  const config = c.get("config");
  const { body, format, masked } = await readReceipt(c.req.raw, headers["Content-Type"], config.bodyDeadlineMs);

  const waitUntil = (work: Promise<unknown>) => c.executionCtx.waitUntil(work);
  const user_key = await userKeyOf(c.get("isolate"), config, headers.app_user_id);
  const stored = await placeAndStore(
    { env: c.env, settings: config, memory: c.get("isolate").placement, waitUntil },
    { chain_id: headers.chain_id, client_id: client.client_id, app_user_id: headers.app_user_id, body, ...(format && { format }), user_key },
    headers["Idempotency-Key"],
    newCreationNotice,
  )
    .catch(noOpenShardRefused)
    .catch(overloadRefused("add"));
  if (stored.kind === "conflict") {
    throw refuse(REFUSALS.idempotencyConflict, "idempotency key reused for a different request");
  }
  if (stored.kind === "added") {
    c.set("shard", stored.shard.name);
    waitUntil(enqueueNotice(c.env, stored.event));
  }
  // Said by this request's own body, never stored: a keyed retry sends the same body, which masks alike.
  const data = masked.length > 0 ? { ...stored.response.data, masked_fields: masked } : stored.response.data;
  return jsonResponse({ ...stored.response, data }, 200);
}

/**
 * The body in our own shape, or in the published format its Content-Type's profile names
 * (docs/api.md#dr-retail): then with that format's name and the receipt in our model.
 */
async function readReceipt(request: Request, contentType: string, deadlineMs: number): Promise<Pick<NewReceipt, "body" | "format"> & { masked: string[] }> {
  const profile = jsonMediaType(contentType).get("profile");
  if (profile === undefined) {
    const { text, masked } = await readJsonBody(request, receiptBody, deadlineMs);
    return { body: text, masked };
  }
  if (!Object.hasOwn(DR_RETAIL_PROFILES, profile)) throw refuse(REFUSALS.unknownProfile, "unknown profile");
  const version = DR_RETAIL_PROFILES[profile as keyof typeof DR_RETAIL_PROFILES];
  const label = `DR Retail v${version}`;
  const { text, masked } = await readJsonBody(request, DR_RETAIL_BODIES[version], deadlineMs, firstFieldRefusal(label));
  // Mapped from the masked text: the model holds no more of a card number than the original.
  return { body: text, masked, format: { name: drRetailFormat(version), mapped: JSON.stringify(mapDrRetail(text, label)) } };
}

// Every shard closed is the operator's to fix, not the till's: a 503 it retries, and a line of
// its own that an alert matches, besides the request line.
function noOpenShardRefused(error: unknown): never {
  if (!(error instanceof NoOpenShardError)) throw error;
  logLine("error", "no-open-shard", { outcome: "add refused: every shard is closed; open or add a shard" });
  throw refuse(REFUSALS.noOpenShard, error.message);
}
