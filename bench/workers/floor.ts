/**
 * The floor Worker: for each operation, only the storage calls and crypto that the operation
 * cannot avoid, in sequence, and the one request log line every request must write, with no
 * validation and no error model. A route's req/s divided by its floor's says how much the route
 * spends beyond its unavoidable work.
 *
 * Never deployed: bench/run.ts bundles it with `wrangler deploy --dry-run` and runs it beside the
 * API Worker in the same Miniflare, with the API Worker's bindings. It trusts every request.
 */
import { SignJWT, base64url, jwtVerify } from "jose";
import { v7 as uuidv7 } from "uuid";
import type { ApiEnv } from "../../src/shared/env.ts";
import { parseTokenKeys } from "../../src/shared/config.ts";
import { secretMatches } from "../../src/api/auth/secret-match.ts";
import { POS_SCOPE, clientKey, type ClientRecord, type CreationNotice, type DeletionNotice } from "../../src/shared/types.ts";
import { idOnShard, shardOfId, shardsOf } from "../../src/storage/shards.ts";
import { deflatedTexts } from "../../src/storage/stored-body.ts";
import { requestFingerprint } from "../../src/storage/placement.ts";
import { deflateRaw } from "../../src/storage/deflate.ts";
import { logLine } from "../../src/shared/log.ts";
import { FLOOR_PATHS, type Deflate } from "../protocol.ts";

const TOKEN_LIFETIME_SECONDS = 3600;

export default {
  async fetch(request, env): Promise<Response> {
    const started = Date.now();
    const response = await answer(request, env);
    // Every request the service answers writes exactly one structured line (docs/api.md: a login
    // "still costs a KV read, a hash and a log line"). Locally that line also crosses workerd's
    // stdout into the Node process that drives the load, work that production does off the
    // isolate; writing the floor's alike keeps that transport out of the ratio.
    logLine("info", "request", {
      request_id: crypto.randomUUID(),
      method: request.method,
      route: new URL(request.url).pathname,
      status: response.status,
      client_id: request.headers.get("client_id") ?? undefined,
      latency_ms: Date.now() - started,
      outcome: "ok",
    });
    return response;
  },
} satisfies ExportedHandler<ApiEnv>;

/** The floor of the operation the path names. */
function answer(request: Request, env: ApiEnv): Promise<Response> | Response {
  switch (new URL(request.url).pathname) {
    case FLOOR_PATHS.trivial:
      return Response.json({ status: "OK" });
    case FLOOR_PATHS.login:
      return login(request, env);
    case FLOOR_PATHS.add:
      return add(request, env);
    case FLOOR_PATHS.delete:
      return remove(request, env);
    case FLOOR_PATHS.deflate:
      return deflateRounds(request);
    default:
      return Response.json({ status: "Not Found" }, { status: 404 });
  }
}

/** 1 KV get + the presented secret hashed and compared in constant time + HMAC sign. */
async function login(request: Request, env: ApiEnv): Promise<Response> {
  const record = await readClient(request, env);
  // Login cannot skip checking the secret, and the secret is kept only hashed: one digest and a
  // constant-time comparison are its unavoidable crypto, as much as the signature is.
  if (!(await secretMatches(header(request, "client_secret"), record.secret_hash))) {
    return Response.json({ status: "Forbidden" }, { status: 403 });
  }
  const now = Math.floor(Date.now() / 1000);
  const { kid, key } = signingKey(env);
  const token = await new SignJWT({ scope: POS_SCOPE })
    .setProtectedHeader({ alg: "HS256", kid, typ: "JWT" })
    .setSubject(record.client_id)
    .setIssuer(env.TOKEN_ISSUER)
    .setAudience(env.TOKEN_AUDIENCE)
    .setIssuedAt(now)
    .setExpirationTime(now + TOKEN_LIFETIME_SECONDS)
    .setJti(crypto.randomUUID())
    .sign(await key);
  return Response.json({ data: { access_token: token }, status: "OK" });
}

/**
 * JWT verify + 1 KV get + 1 limit count + the body deflated + 1 D1 batch() that inserts the
 * receipt and its created event, and with an Idempotency-Key the key's record + 1 queue send. The
 * event is in the service's own outbox, so the notifier does for a floor event what it does for a
 * real one: an add's event is part of its unavoidable work. The body is stored deflated, in the
 * column add stores it in (migration 0022): the storage bill decided that form, so its deflate is
 * the product's work, not add's own. A key's record (docs/api.md#add: a repeat within 24 hours
 * answers as the first call did; the same key for another request is refused) must hold the first
 * answer and what tells another request from a repeat, written with the receipt or not at all:
 * add's own fingerprint of the request and one more row in the same batch.
 */
async function add(request: Request, env: ApiEnv): Promise<Response> {
  await verify(request, env);
  const record = await readLimitedClient(request, env, env.ADD_LIMIT_STANDARD);
  const shard = shardsOf(env)[0]!;
  const { db } = shard;
  const body = await request.text();
  const receiptId = idOnShard(uuidv7(), shard);
  const createdAt = new Date().toISOString();
  const event: CreationNotice = {
    event_id: idOnShard(uuidv7(), shard),
    type: "receipt.created",
    occurred_at: createdAt,
    receipt_id: receiptId,
    app_user_id: header(request, "app_user_id"),
    chain_id: record.chains[0]!,
    client_id: record.client_id,
    created_at: createdAt,
  };
  const answer = { data: { receipt_id: receiptId, created_at: createdAt }, status: "OK" };
  const key = request.headers.get("idempotency-key");
  const keyRecord =
    key === null
      ? []
      : [
          db.prepare("INSERT INTO idempotency_keys (client_id, idempotency_key, fingerprint, receipt_id, response, created_at) VALUES (?, ?, ?, ?, ?, ?)").bind(
            record.client_id,
            key,
            await requestFingerprint({ chain_id: event.chain_id, app_user_id: event.app_user_id, body }),
            receiptId,
            JSON.stringify(answer),
            createdAt,
          ),
        ];
  await db.batch([
    ...keyRecord,
    db.prepare(
      "INSERT INTO receipts (receipt_id, chain_id, client_id, app_user_id, body, deflated, created_at) VALUES (?, ?, ?, ?, '', ?, ?)",
    ).bind(receiptId, event.chain_id, event.client_id, event.app_user_id, await deflatedTexts({ body, mapped: null }), createdAt),
    db.prepare("INSERT INTO notice_outbox (event_id, receipt_id, payload, created_at) VALUES (?, ?, ?, ?)").bind(
      event.event_id,
      receiptId,
      JSON.stringify(event),
      createdAt,
    ),
  ]);
  await env.NOTICES.send(event, { contentType: "json" });
  return Response.json(answer);
}

/**
 * JWT verify + 1 KV get + 1 limit count + 1 D1 read + 1 D1 batch() + 1 queue send. The batch records the notice
 * in the service's own outbox, so the notifier does for a floor notice what it does for a real one.
 */
async function remove(request: Request, env: ApiEnv): Promise<Response> {
  await verify(request, env);
  await readLimitedClient(request, env, env.DELETE_LIMIT_STANDARD);
  const receiptId = header(request, "receipt_id");
  const shard = shardOfId(shardsOf(env), receiptId)!;
  const receipt = await shard.db.prepare("SELECT chain_id, client_id, app_user_id FROM receipts WHERE receipt_id = ?")
    .bind(receiptId)
    .first<Pick<DeletionNotice, "chain_id" | "client_id" | "app_user_id">>();
  const notice: DeletionNotice = {
    event_id: idOnShard(uuidv7(), shard),
    type: "receipt.deleted",
    occurred_at: new Date().toISOString(),
    receipt_id: receiptId,
    app_user_id: receipt!.app_user_id,
    chain_id: receipt!.chain_id,
    client_id: receipt!.client_id,
  };
  await shard.db.batch([
    shard.db.prepare("DELETE FROM receipts WHERE receipt_id = ?").bind(receiptId),
    shard.db.prepare("INSERT INTO notice_outbox (event_id, receipt_id, payload, created_at) VALUES (?, ?, ?, ?)").bind(
      notice.event_id,
      receiptId,
      JSON.stringify(notice),
      notice.occurred_at,
    ),
    // The audit record is part of what a delete must write since the audit trail came.
    shard.db
      .prepare("INSERT INTO audit_log (at, action, receipt_id, chain_id, client_id, app_user, request_id) VALUES (?, 'receipt.deleted', ?, ?, ?, ?, ?)")
      .bind(notice.occurred_at, receiptId, notice.chain_id, notice.client_id, notice.app_user_id, "floor"),
  ]);
  await env.NOTICES.send(notice, { contentType: "json" });
  return Response.json({ message: "deleted", status: "OK" });
}

/**
 * The body deflated `rounds` times (header) the way `deflate-with` names: no storage, no answer
 * worth reading. The driver times it against 0 rounds, from outside: a Worker's clock stands
 * still while it computes.
 */
async function deflateRounds(request: Request): Promise<Response> {
  const bytes = new Uint8Array(await request.arrayBuffer());
  const rounds = Number(header(request, "rounds"));
  const deflate = DEFLATE_WITH[header(request, "deflate-with") as Deflate];
  let size = 0;
  for (let round = 0; round < rounds; round += 1) size = (await deflate(bytes)).byteLength;
  return Response.json({ size });
}

const DEFLATE_WITH: Record<Deflate, (bytes: Uint8Array) => Promise<Uint8Array>> = {
  stream: deflateRaw,
  response: async (bytes) =>
    new Uint8Array(await new Response(new Blob([bytes as Uint8Array<ArrayBuffer>]).stream().pipeThrough(new CompressionStream("deflate-raw"))).arrayBuffer()),
};

async function readClient(request: Request, env: ApiEnv): Promise<ClientRecord> {
  return (await env.CLIENTS.get<ClientRecord>(clientKey(header(request, "client_id")), "json"))!;
}

// The client's count on the route's limit (docs/api.md#rate-limits) is part of what add and delete
// must do since the limits came: one call to the standard tier's binding.
async function readLimitedClient(request: Request, env: ApiEnv, limiter: RateLimit): Promise<ClientRecord> {
  const record = await readClient(request, env);
  await limiter.limit({ key: record.client_id });
  return record;
}

async function verify(request: Request, env: ApiEnv): Promise<void> {
  await jwtVerify(header(request, "authorization").slice("Bearer ".length), await signingKey(env).key, {
    algorithms: ["HS256"],
  });
}

function header(request: Request, name: string): string {
  return request.headers.get(name) ?? "";
}

// Parsing the key set and importing a key is not per-request work in a careful Worker, so the
// floor does both once per isolate.
let signer: { kid: string; key: Promise<CryptoKey> } | undefined;

function signingKey(env: ApiEnv): { kid: string; key: Promise<CryptoKey> } {
  if (!signer) {
    const { kid, k } = parseTokenKeys(env.TOKEN_KEYS)[0]!;
    const key = crypto.subtle.importKey("raw", base64url.decode(k), { name: "HMAC", hash: "SHA-256" }, false, [
      "sign",
      "verify",
    ]);
    signer = { kid, key };
  }
  return signer;
}
