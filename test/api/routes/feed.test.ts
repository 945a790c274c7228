/**
 * docs/api.md#event-feed: GET /receipts/v2/events, the app push service's way to catch up, read
 * through the real Worker on the test run's three shards.
 */
import { env } from "cloudflare:workers";
import { beforeAll, describe, expect, it, vi } from "vitest";
import { decodeJwt } from "jose";
import { ConfigError, DEFAULT_FEED_SETTLE_SECONDS, MIN_FEED_SETTLE_SECONDS, apiConfig } from "../../../src/shared/config.ts";
import { PATHS } from "../../../src/shared/paths.ts";
import { stampShardTag } from "../../../src/shared/shard-ids.ts";
import { APP_SCOPE, type CreationNotice } from "../../../src/shared/types.ts";
import { eraseAppUser } from "../../../src/storage/erasure.ts";
import type { JobShard, StepRunner } from "../../../src/storage/steps.ts";
import { FEED_SHARD_BUDGET } from "../../../src/storage/outbox/operations.ts";
import { moveToFailed } from "../../../src/storage/outbox/statements.ts";
import { runBatch } from "../../../src/storage/statement.ts";
import type { Shard } from "../../../src/storage/shards.ts";
import {
  WARM_ISOLATE,
  call,
  countedCall,
  expectErrorShape,
  issueClient,
  loginHeadersFor,
  newCaller,
  postAdd,
  uniqueId,
  validReceiptBody,
  type Caller,
  type TestClient,
} from "../../support/api.ts";
import { drRetailContentType } from "../../../src/shared/dr-retail-profiles.ts";
import { drTestReceipts } from "../../support/dr-retail.ts";
import { deleteHeadersFor, seedReceipt, waitForDelivery, waitForPushes } from "../../support/notices.ts";
import { SHARDS, idOn, storedReceipt } from "../../support/shards.ts";
import { TEST_AUDIT_HASH_KEY } from "../../support/keys.ts";
import { parseAuditHashKey } from "../../../src/shared/audit-hash-key.ts";
import { shardOfId } from "../../../src/shared/shard-ids.ts";
import { archiveShard } from "../../../src/storage/archive/move.ts";
import { newIsolateState } from "../../../src/api/context.ts";

const DAY_MS = 24 * 60 * 60 * 1000;

/** A fresh app push service's client, logged in with scope service.app: the feed's headers. */
async function appCaller(): Promise<{ client: TestClient; headers: Record<string, string> }> {
  const client = await issueClient({ chains: [], scopes: [APP_SCOPE], clientId: uniqueId("app") });
  const login = await call(PATHS.login, { headers: { ...loginHeadersFor(client), scope: APP_SCOPE } });
  expect(login.status).toBe(200);
  return { client, headers: { Authorization: `Bearer ${login.body.data.access_token}`, client_id: client.clientId } };
}

let app: Awaited<ReturnType<typeof appCaller>>;
let pos: Caller;
beforeAll(async () => {
  app = await appCaller();
  pos = await newCaller();
});

/** How much of its newest time the feed holds back, as the test run configures it. */
const SETTLE_MS = apiConfig(env).feedSettleMs;

/**
 * A page of the feed as a reader gets it once what this test made has settled: read with the
 * Worker's clock moved on by the feed's hold-back, as if the reader asked that much later, with
 * nothing committed meanwhile. `readFeedNow` reads at the true time.
 */
async function readFeed(query: Record<string, string | number> = {}, headers = app.headers) {
  vi.useFakeTimers({ toFake: ["Date"], now: Date.now() + SETTLE_MS });
  try {
    return await readFeedNow(query, headers);
  } finally {
    vi.useRealTimers();
  }
}

function readFeedNow(query: Record<string, string | number> = {}, headers = app.headers) {
  const search = new URLSearchParams(Object.entries(query).map(([name, value]) => [name, String(value)]));
  return call(`${PATHS.events}?${search}`, { method: "GET", headers });
}

/** Every event after `after`, page by page of `limit`, and the pages' sizes; `read` reads a page. */
async function readAll(
  after: string,
  limit: number,
  read: typeof readFeed = readFeed,
): Promise<{ events: Record<string, any>[]; pages: number[]; next: string }> {
  const events: Record<string, any>[] = [];
  const pages: number[] = [];
  let cursor: string | null = after;
  let last = after;
  while (cursor !== null) {
    last = cursor;
    const answer = await read({ after: cursor, limit });
    expect(answer.status, JSON.stringify(answer.body)).toBe(200);
    events.push(...answer.body.data.events);
    pages.push(answer.body.data.events.length);
    cursor = answer.body.data.next;
  }
  return { events, pages, next: last };
}

/** A UUIDv7 of a given time on a shard, as the Workers would have made it then. */
function eventIdAt(ms: number, shard: Shard): string {
  const hex = ms.toString(16).padStart(12, "0");
  const random = crypto.randomUUID();
  return stampShardTag(`${hex.slice(0, 8)}-${hex.slice(8)}-7000-${random.slice(19)}`, shard.tag);
}

// Seeded events get a millisecond each: two of one millisecond would sort by their random bits.
let lastSeededMs = 0;
function nextEventId(shard: Shard): string {
  lastSeededMs = Math.max(Date.now(), lastSeededMs + 1);
  return eventIdAt(lastSeededMs, shard);
}

/**
 * A receipt stored on `shard` long ago with its created event of that time, written as add
 * wrote them then: add itself refuses an event_id older than its commit allows.
 */
async function seedCreatedAt(ms: number, shard: Shard) {
  const receipt = { receipt_id: eventIdAt(ms, shard), client_id: pos.client.clientId, chain_id: pos.client.chains[0]!, app_user_id: uniqueId("au") };
  const at = new Date(ms).toISOString();
  const event: CreationNotice = { event_id: eventIdAt(ms, shard), type: "receipt.created", occurred_at: at, ...receipt, created_at: at };
  await shard.db.batch([
    shard.db
      .prepare("INSERT INTO receipts (receipt_id, chain_id, client_id, app_user_id, body, created_at) VALUES (?1, ?2, ?3, ?4, '{}', ?5)")
      .bind(receipt.receipt_id, receipt.chain_id, receipt.client_id, receipt.app_user_id, at),
    shard.db
      .prepare("INSERT INTO notice_outbox (event_id, receipt_id, payload, created_at) VALUES (?1, ?2, ?3, ?4)")
      .bind(event.event_id, receipt.receipt_id, JSON.stringify(event), at),
  ]);
  return { ...event, receipt: {} };
}

/** A receipt stored on `shard` with its created event recorded as add records it, never enqueued. */
async function seedCreated(shard: Shard, eventId = nextEventId(shard), appUserId = uniqueId("au")) {
  const at = new Date().toISOString();
  let event: CreationNotice | undefined;
  await seedReceipt(pos.client, { receipt_id: idOn(shard), app_user_id: appUserId }, (receipt) => {
    event = { event_id: eventId, type: "receipt.created", occurred_at: at, ...receipt, created_at: at };
    return event;
  });
  return { ...event!, receipt: {} };
}

/** The shards as a job takes them, straight through D1. */
function jobShards(): JobShard[] {
  return SHARDS.map((shard) => ({
    ...shard,
    run: async (statements) => (await runBatch(shard.db, statements)).map(({ results }) => results),
  }));
}

// Each new event_id is later than the one before (the Worker's are made after a login at least):
// a marker made first starts a reading of only what a test made after it.
async function marker(): Promise<string> {
  return (await seedCreated(SHARDS[0]!)).event_id;
}

describe("docs/api.md#event-feed order and paging", () => {
  it("returns the events of all three shards in event_id order, page by page through next, undelivered ones too", async () => {
    const after = await marker();
    const made: Awaited<ReturnType<typeof seedCreated>>[] = [];
    for (let i = 0; i < 9; i += 1) made.push(await seedCreated(SHARDS[i % SHARDS.length]!));
    const { events, pages } = await readAll(after, 4);
    const ours = events.filter((event) => made.some((m) => m.event_id === event.event_id));
    expect(ours).toEqual(made);
    expect(events.map((event) => event.event_id)).toEqual(events.map((event) => event.event_id).sort());
    expect(new Set(ours.map((event) => event.event_id.slice(15, 18))).size).toBe(3);
    // Full pages of 4, then what is left, then an empty page whose next is null.
    expect(pages.at(-1)).toBe(0);
    expect(pages.slice(0, -2).every((size) => size === 4)).toBe(true);
  });

  it("next is the page's last event_id, and null once nothing followed after", async () => {
    const after = await marker();
    const first = await seedCreated(SHARDS[1]!);
    const page = await readFeed({ after, limit: 1 });
    expect(page.body).toEqual({ data: { events: [first], next: first.event_id }, status: "OK", status_code: 200 });
    expect(page.headers.get("content-type")).toBe("application/json; charset=utf-8");
    const empty = await readFeed({ after: first.event_id });
    expect(empty.body.data).toEqual({ events: [], next: null });
  });

  it("carries the same event objects as the push: receipt.created with the stored body, then receipt.deleted", async () => {
    const after = await marker();
    const caller = await newCaller();
    const added = await postAdd(caller.headers);
    expect(added.status).toBe(200);
    const { receipt_id } = added.body.data;
    const [created] = await waitForPushes(receipt_id, 1);
    const owner = { receipt_id, client_id: caller.client.clientId, chain_id: caller.headers.chain_id!, app_user_id: caller.headers.app_user_id! };
    expect((await call(PATHS.delete, { headers: deleteHeadersFor(caller.token, owner) })).status).toBe(200);
    const pushes = await waitForPushes(receipt_id, 2);

    const { events } = await readAll(after, 100);
    const ofReceipt = events.filter((event) => event.receipt_id === receipt_id);
    // The created event's receipt is gone now: left out, as the push leaves such an event out.
    expect(ofReceipt.map((event) => event.type)).toEqual(["receipt.deleted"]);
    const deleted = pushes.find((push) => push.body.includes("receipt.deleted"))!;
    expect(ofReceipt[0]).toEqual(JSON.parse(deleted.body));
    // A cursor at the left-out event still reads on from there.
    const createdId = JSON.parse(created!.body).event_id;
    expect((await readFeed({ after: createdId })).status).toBe(200);
  });

  it("a receipt.created of a stored receipt is byte for byte the push: the body as add stored it", async () => {
    const after = await marker();
    const caller = await newCaller();
    const body = JSON.stringify({ ...validReceiptBody(), metadata: { note: "caf\u00e9 \u00fcber" } });
    const added = await postAdd(caller.headers, body);
    expect(added.status).toBe(200);
    const [push] = await waitForPushes(added.body.data.receipt_id, 1);
    const answer = await readFeed({ after, limit: 100 });
    const event = answer.body.data.events.find((each: { receipt_id?: string }) => each.receipt_id === added.body.data.receipt_id);
    expect(event).toEqual(JSON.parse(push!.body));
    expect(event.receipt).toEqual(JSON.parse(body));
  });

  it("docs/api.md#dr-retail a DR Retail receipt's receipt.created in the feed is the push: our model, its format and the original", async () => {
    const after = await marker();
    const caller = await newCaller();
    const receipt = drTestReceipts().find(({ name }) => name.startsWith("yen"))!;
    const added = await postAdd({ ...caller.headers, "Content-Type": drRetailContentType(receipt.version) }, receipt.body);
    expect(added.status).toBe(200);
    const [push] = await waitForPushes(added.body.data.receipt_id, 1);
    const answer = await readFeed({ after, limit: 100 });
    const event = answer.body.data.events.find((each: { receipt_id?: string }) => each.receipt_id === added.body.data.receipt_id);
    expect(event).toEqual(JSON.parse(push!.body));
    expect(event).toMatchObject({ format: "dr-retail/v1.0", original: receipt.body, receipt: { currency: "JPY", total: 1280 } });
  });

  it("dead-lettered events are in the feed too: it is for catching up on what the push did not bring", async () => {
    const after = await marker();
    const shard = SHARDS[2]!;
    const event = await seedCreated(shard);
    // Dead-lettered with no failed attempt, its retry window (none here) since it was made over.
    await runBatch(shard.db, moveToFailed(event.event_id, new Date(), 0));
    const { events } = await readAll(after, 100);
    expect(events).toContainEqual(event);
    expect((await readFeed({ after: event.event_id })).status).toBe(200);
  });
});

describe("docs/api.md#event-feed window", () => {
  it("without after starts at the window: an event 13 days old is in it, one 15 days old is not", async () => {
    const inside = await seedCreatedAt(Date.now() - 13 * DAY_MS, SHARDS[1]!);
    const outside = await seedCreatedAt(Date.now() - 15 * DAY_MS, SHARDS[2]!);
    const page = await readFeed({ limit: 100 });
    expect(page.status).toBe(200);
    expect(page.body.data.events[0]).toEqual(inside);
    expect(page.body.data.events.map((event: { event_id: string }) => event.event_id)).not.toContain(outside.event_id);
    // An after older than the window names no event of the feed, though its row is still stored.
    const old = await readFeed({ after: outside.event_id });
    expect(expectErrorShape(old, 406, "Not Acceptable")).toContain("Query parameter after");
  });

  it("EVENT_FEED_DAYS sets the window, and above the 14 days delivered events are kept it is refused as a setting", async () => {
    const shard = SHARDS[0]!;
    const twoDaysOld = await seedCreatedAt(Date.now() - 2 * DAY_MS, shard);
    const short = await countedCall(`${PATHS.events}?limit=100`, { method: "GET", headers: app.headers }, { EVENT_FEED_DAYS: "1" });
    expect(short.answer.status).toBe(200);
    expect(short.answer.body.data.events.map((event: { event_id: string }) => event.event_id)).not.toContain(twoDaysOld.event_id);
    const long = await countedCall(`${PATHS.events}?limit=1`, { method: "GET", headers: app.headers }, { EVENT_FEED_DAYS: "15" });
    expectErrorShape(long.answer, 500, "Internal Server Error");
  });
});

describe("docs/api.md#event-feed refusals of after and limit", () => {
  const unknownOnAShard = () => nextEventId(SHARDS[1]!);
  const freeTag = Array.from({ length: 0x1000 }, (_, tag) => tag).find((tag) => !SHARDS.some((shard) => shard.tag === tag))!;
  const ofNoShard = () => stampShardTag(eventIdAt(Date.now(), SHARDS[0]!), freeTag);

  it.each([
    ["malformed", "not-an-id"],
    ["upper-case", () => unknownOnAShard().toUpperCase()],
    ["empty", ""],
    ["unknown", unknownOnAShard],
    ["of no shard", ofNoShard],
  ] as const)("an after that is %s: 406 naming after", async (_label, value) => {
    const answer = await readFeed({ after: typeof value === "function" ? value() : value });
    expect(expectErrorShape(answer, 406, "Not Acceptable")).toContain("Query parameter after");
  });

  it("after sent twice: 406 naming after", async () => {
    const after = await marker();
    const answer = await call(`${PATHS.events}?after=${after}&after=${after}`, { method: "GET", headers: app.headers });
    expect(expectErrorShape(answer, 406, "Not Acceptable")).toContain("Query parameter after");
  });

  it.each(["0", "101", "1.5", "-1", "01", "ten", ""])("limit %j: 406 naming limit", async (limit) => {
    const answer = await readFeed({ limit });
    expect(expectErrorShape(answer, 406, "Not Acceptable")).toContain("Query parameter limit");
  });

  it("limit 1 and 100 are taken; without limit a page holds up to 100", async () => {
    expect((await readFeed({ limit: 1 })).body.data.events.length).toBeLessThanOrEqual(1);
    expect((await readFeed({ limit: 100 })).status).toBe(200);
    expect((await readFeed()).body.data.events.length).toBeLessThanOrEqual(100);
  });
});

describe("docs/api.md#event-feed who may read it", () => {
  it("a POS token on the feed: 403 naming Authorization", async () => {
    const answer = await readFeed({}, { Authorization: `Bearer ${pos.token}`, client_id: pos.client.clientId });
    expect(expectErrorShape(answer, 403, "Forbidden")).toContain("Header Authorization holds a token without the service.app scope");
  });

  it("an app token on add and on delete: 403 naming Authorization, and nothing stored or deleted", async () => {
    const receipt = await seedReceipt(pos.client);
    const added = await postAdd({ ...pos.headers, Authorization: app.headers.Authorization!, client_id: app.client.clientId });
    expect(expectErrorShape(added, 403, "Forbidden")).toContain("Header Authorization holds a token without the service.pos scope");
    const deleted = await call(PATHS.delete, {
      headers: { ...deleteHeadersFor("x", receipt), Authorization: app.headers.Authorization!, client_id: app.client.clientId },
    });
    expect(expectErrorShape(deleted, 403, "Forbidden")).toContain("Header Authorization holds a token without the service.pos scope");
    expect(await storedReceipt(receipt.receipt_id)).not.toBeNull();
  });

  it("the app token's client_id must be its subject, as on add and delete", async () => {
    const other = await appCaller();
    const answer = await readFeed({}, { ...app.headers, client_id: other.client.clientId });
    expect(expectErrorShape(answer, 403, "Forbidden")).toContain("Header client_id is not the client");
  });

  it("missing headers: 400 naming both", async () => {
    const answer = await readFeed({}, {});
    const message = expectErrorShape(answer, 400, "Bad Request");
    expect(message).toContain("Authorization");
    expect(message).toContain("client_id");
  });

  it("login with scope service.app: granted to an app client, its token carries the scope; refused to a POS client", async () => {
    const token = app.headers.Authorization!.slice("Bearer ".length);
    expect(decodeJwt(token)).toMatchObject({ sub: app.client.clientId, scope: APP_SCOPE });
    const posAsks = await call(PATHS.login, { headers: { ...loginHeadersFor(pos.client), scope: APP_SCOPE } });
    expect(expectErrorShape(posAsks, 403, "Not Acceptable")).toContain("Header scope");
    const appAsksPos = await call(PATHS.login, { headers: loginHeadersFor(app.client) });
    expect(expectErrorShape(appAsksPos, 403, "Not Acceptable")).toContain("Header scope");
  });

  it("any method but GET and HEAD: 405 with Allow: GET, HEAD; HEAD answers as GET", async () => {
    for (const method of ["POST", "PUT", "DELETE", "PATCH"]) {
      const answer = await call(PATHS.events, { method, headers: app.headers });
      expect(expectErrorShape(answer, 405, "Method Not Allowed")).toContain("use GET");
      expect(answer.headers.get("allow")).toBe("GET, HEAD");
    }
    expect((await call(PATHS.events, { method: "HEAD", headers: app.headers })).status).toBe(200);
  });
});

describe("docs/api.md#event-feed erasure", () => {
  it("an erased app user's events are gone from the feed, all but app_user.erased itself", async () => {
    const after = await marker();
    const appUser = uniqueId("au-erased");
    const kept = await seedCreated(SHARDS[0]!, undefined, appUser);
    await seedCreated(SHARDS[1]!, undefined, appUser);
    const deletedOne = await seedCreated(SHARDS[2]!, undefined, appUser);
    expect((await call(PATHS.delete, { headers: deleteHeadersFor(pos.token, deletedOne) })).status).toBe(200);
    const before = (await readAll(after, 100)).events.filter((event) => event.app_user_id === appUser);
    expect(before.map((event) => event.type).sort()).toEqual(["receipt.created", "receipt.created", "receipt.deleted"]);
    expect(before.map((event) => event.event_id)).toContain(kept.event_id);

    const erasure = await eraseAppUser(appUser, jobShards(), crypto.getRandomValues(new Uint8Array(32)));
    const afterwards = (await readAll(after, 100)).events.filter((event) => event.app_user_id === appUser);
    expect(afterwards).toEqual([{ ...erasure.event, app_user_id: appUser }]);
  });
});

describe("docs/api.md#event-feed the tail: a reader that follows next alone sees every event once", () => {
  it("the feed holds back its newest FEED_SETTLE_SECONDS: an event made now is in a page read that much later, and its ID as after is good meanwhile", async () => {
    const after = await seedCreatedAt(Date.now() - 2 * SETTLE_MS, SHARDS[0]!);
    const fresh = await seedCreated(SHARDS[1]!);
    const now = await readAll(after.event_id, 100, readFeedNow);
    expect(now.events.map((event) => event.event_id)).not.toContain(fresh.event_id);
    expect((await readAll(after.event_id, 100)).events).toContainEqual(fresh);
    // A cursor taken from a push, newer than the settled part: nothing follows it yet.
    expect((await readFeedNow({ after: fresh.event_id })).body.data).toEqual({ events: [], next: null });
  });

  it("across an erasure whose last step comes long after its first, and an add that commits 3 s after its event_id was made", async () => {
    const start = await seedCreatedAt(Date.now() - 2 * SETTLE_MS, SHARDS[0]!);
    const appUser = uniqueId("au-erased");
    // The erasure parks before its last step, as one over many shards does for minutes.
    let parked!: () => void;
    const parking = new Promise<void>((resolve) => (parked = resolve));
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    const steps: StepRunner = async (name, work) => {
      if (name === "record and send") {
        parked();
        await released;
      }
      return work();
    };
    const erasing = eraseAppUser(appUser, jobShards(), crypto.getRandomValues(new Uint8Array(32)), { steps });
    await parking;
    const made = await seedCreated(SHARDS[1]!);

    const seen: Record<string, any>[] = [];
    let cursor = start.event_id;
    const readOn = async (read: typeof readFeed) => {
      const { events, next } = await readAll(cursor, 2, read);
      seen.push(...events);
      cursor = next;
    };
    await readOn(readFeedNow);
    // An add whose D1 round trip took 3 s: its event_id is older than the events read just now.
    const late = await seedCreated(SHARDS[2]!, eventIdAt(Date.now() - 3_000, SHARDS[2]!));
    await readOn(readFeed);
    release();
    const erasure = await erasing;
    await readOn(readFeed);

    const ours = seen.filter((event) => [made.event_id, late.event_id, erasure.event.event_id].includes(event.event_id));
    const expected = [made, late, { ...erasure.event, app_user_id: appUser }].sort((a, b) => (a.event_id < b.event_id ? -1 : 1));
    expect(ours).toEqual(expected);
    expect(new Set(seen.map((event) => event.event_id)).size).toBe(seen.length);
    expect(erasure.event.occurred_at < made.occurred_at).toBe(true);
  });

  it("FEED_SETTLE_SECONDS below the commit bound and a second is refused as a setting", async () => {
    for (const bad of ["5", "0", "-1", "ten"]) {
      const { answer } = await countedCall(`${PATHS.events}?limit=1`, { method: "GET", headers: app.headers }, { FEED_SETTLE_SECONDS: bad });
      expectErrorShape(answer, 500, "Internal Server Error");
    }
    expect(() => apiConfig({ ...env, FEED_SETTLE_SECONDS: "5" })).toThrow(
      new ConfigError(`FEED_SETTLE_SECONDS must be at least ${MIN_FEED_SETTLE_SECONDS}, more than an event may take to commit`),
    );
    expect(apiConfig({ ...env, FEED_SETTLE_SECONDS: "6" }).feedSettleMs).toBe(6_000);
    expect(SETTLE_MS).toBe(DEFAULT_FEED_SETTLE_SECONDS * 1000);
  });
});

describe("docs/api.md#event-feed a receipt's receipt.created stays in the feed for its window, whether or not the archive moved it", () => {
  /** A receipt added through the API, its created event pushed and delivered, then moved to the archive by its shard's run. */
  async function addedAndArchived(caller: Caller) {
    const added = await postAdd(caller.headers);
    expect(added.status).toBe(200);
    const { receipt_id } = added.body.data;
    const [push] = await waitForPushes(receipt_id, 1);
    await waitForDelivery(receipt_id, 1);
    const shard = shardOfId(SHARDS, receipt_id)!;
    await archiveShard(jobShards().find(({ name }) => name === shard.name)!, env.ARCHIVE, parseAuditHashKey(TEST_AUDIT_HASH_KEY), {
      runId: uniqueId("archive"),
      archiveAfterMs: apiConfig(env).archiveAfterMs,
    });
    expect(await storedReceipt(receipt_id)).toBeNull();
    const owner = { receipt_id, client_id: caller.client.clientId, chain_id: caller.headers.chain_id!, app_user_id: caller.headers.app_user_id! };
    return { owner, created: JSON.parse(push!.body) as Record<string, unknown>, shard };
  }

  const keptBodies = (shard: Shard, receiptId: string) =>
    shard.db.prepare("SELECT archived_body FROM notice_outbox WHERE receipt_id = ?1 AND archived_body IS NOT NULL").bind(receiptId).all();

  it("an archived receipt's created event is in the feed as pushed, body and all; once the receipt is deleted, only its deleted event is, and no copy of its body is left in D1", async () => {
    const after = await marker();
    const caller = await newCaller();
    const { owner, created, shard } = await addedAndArchived(caller);
    const ofReceipt = async () => (await readAll(after, 100)).events.filter((event) => event.receipt_id === owner.receipt_id);
    expect(await ofReceipt()).toEqual([created]);

    expect((await call(PATHS.delete, { headers: deleteHeadersFor(caller.token, owner) })).status).toBe(200);
    expect((await ofReceipt()).map((event) => event.type)).toEqual(["receipt.deleted"]);
    expect((await keptBodies(shard, owner.receipt_id)).results).toEqual([]);
  });

  it("an erasure of its app user takes the archived receipt's events from the feed, and the copy of its body from D1", async () => {
    const after = await marker();
    const caller = await newCaller();
    const { owner, shard } = await addedAndArchived(caller);
    expect((await keptBodies(shard, owner.receipt_id)).results).toHaveLength(1);
    const erasure = await eraseAppUser(owner.app_user_id, jobShards(), parseAuditHashKey(TEST_AUDIT_HASH_KEY), { archive: env.ARCHIVE });
    expect(erasure.receipts_erased).toBe(1);
    const ofUser = (await readAll(after, 100)).events.filter((event) => event.app_user_id === owner.app_user_id);
    expect(ofUser).toEqual([{ ...erasure.event, app_user_id: owner.app_user_id }]);
    expect((await keptBodies(shard, owner.receipt_id)).results).toEqual([]);
  });
});

describe("docs/api.md#event-feed cost: one D1 statement per shard, whatever the page", () => {
  it("a page costs one KV read (the client record) and one D1 query on each of the three shards", async () => {
    const warm = newIsolateState();
    const url = `${PATHS.events}?limit=100`;
    await countedCall(url, { method: "GET", headers: app.headers }, WARM_ISOLATE, warm);
    const { answer, ledger } = await countedCall(url, { method: "GET", headers: app.headers }, WARM_ISOLATE, warm);
    expect(answer.status).toBe(200);
    expect(ledger.names().sort()).toEqual(["kv.get", ...SHARDS.map(() => "d1.all")].sort());
    const after = await marker();
    const paged = await countedCall(`${PATHS.events}?after=${after}&limit=2`, { method: "GET", headers: app.headers }, WARM_ISOLATE, warm);
    expect(paged.answer.status).toBe(200);
    expect(paged.ledger.names().filter((name) => name.startsWith("d1."))).toEqual(SHARDS.map(() => "d1.all"));
  });

  it("docs/api.md#limits as many shards as one request may read: the page is served", async () => {
    const upTo = Object.fromEntries(Array.from({ length: FEED_SHARD_BUDGET - SHARDS.length }, (_, i) => [`DB_F${i}`, SHARDS[0]!.db]));
    const { answer } = await countedCall(`${PATHS.events}?limit=1`, { method: "GET", headers: app.headers }, upTo);
    expect(answer.status).toBe(200);
  }, 120_000);

  it("more shards than one request may read (D1's 1,000 queries per invocation): 500 before any D1 query", async () => {
    const many = Object.fromEntries(Array.from({ length: FEED_SHARD_BUDGET + 1 }, (_, i) => [`DB_F${i}`, SHARDS[0]!.db]));
    const { answer, ledger } = await countedCall(`${PATHS.events}?limit=1`, { method: "GET", headers: app.headers }, many);
    expectErrorShape(answer, 500, "Internal Server Error");
    expect(ledger.names().filter((name) => name.startsWith("d1."))).toEqual([]);
  });
});
