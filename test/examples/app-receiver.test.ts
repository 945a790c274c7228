/**
 * The app side's kit (docs/api.md#receipt-events): the Standard Webhooks reference library
 * verifies every event type as the notifier's own signing code (src/notifier/push.ts) signs it;
 * the example's view applies events at least once and in any order as an app must; the
 * example receiver does both over a real socket, fed by the notifier's own push function; and its
 * `export` and `forget` act for one app user through the real API Worker's jobs.
 */
import { spawn } from "node:child_process";
import { once } from "node:events";
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { Webhook, WebhookVerificationError } from "standardwebhooks";
import type { Miniflare } from "miniflare";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { pushNotice, webhookSignature } from "../../src/notifier/push.ts";
import { newClientRecord } from "../../src/shared/client-records.ts";
import { MIN_FEED_SETTLE_SECONDS } from "../../src/shared/config.ts";
import { drRetailContentType, drRetailFormat } from "../../src/shared/dr-retail-profiles.ts";
import { drRetailReceipt } from "../../harness/bodies.ts";
import { APP_SCOPE, clientKey, type DeletionNotice } from "../../src/shared/types.ts";
import { catchUp, login } from "../../examples/app-feed.ts";
import { appUserArguments, pushSecret, receiverArguments, runAppUserCommand, startReceiver, type Receiver } from "../../examples/app-receiver.ts";
import { AppView, describeOutcome, MalformedEvent, type AppEvent } from "../../examples/app-view.ts";
import { TEST_PUSH_SECRET } from "../support/keys.ts";
import { startApiWorker } from "../support/api-miniflare.ts";
import { ROOT, freshState } from "../support/run-script.ts";

type CreatedEvent = Extract<AppEvent, { type: "receipt.created" }>;

// The notifier's deployed push timeout (src/notifier/wrangler.jsonc).
const PUSH_TIMEOUT_MS = 10_000;
const OTHER_SECRET = `whsec_${Buffer.from("another-secret-of-32-bytes-long!").toString("base64")}`;

describe("docs/api.md#deletion-notices: standardwebhooks verifies each event type as the notifier signs it", () => {
  for (const event of sampleEvents("user-42")) {
    it(`${event.type}: verified, and the payload comes back as sent`, async () => {
      const { body, headers } = await signedDelivery(event);
      expect(new Webhook(TEST_PUSH_SECRET).verify(body, headers)).toEqual(event);
    });
  }

  it("during a rotation the notifier signs with both secrets, and either one verifies", async () => {
    const [event] = sampleEvents("user-42");
    const { body, headers } = await signedDelivery(event, { secrets: [OTHER_SECRET, TEST_PUSH_SECRET] });
    expect(headers["webhook-signature"].split(" ")).toHaveLength(2);
    expect(new Webhook(TEST_PUSH_SECRET).verify(body, headers)).toEqual(event);
    expect(new Webhook(OTHER_SECRET).verify(body, headers)).toEqual(event);
  });
});

describe("docs/api.md#deletion-notices: standardwebhooks refuses what the notifier did not sign now", () => {
  const [event] = sampleEvents("user-42");

  it("a tampered body", async () => {
    const { body, headers } = await signedDelivery(event);
    const tampered = body.replace('"user-42"', '"user-43"');
    expect(tampered).not.toBe(body);
    expect(() => new Webhook(TEST_PUSH_SECRET).verify(tampered, headers)).toThrow(WebhookVerificationError);
  });

  it("another webhook-id for the same body and signature", async () => {
    const { body, headers } = await signedDelivery(event);
    const replayed = { ...headers, "webhook-id": crypto.randomUUID() };
    expect(() => new Webhook(TEST_PUSH_SECRET).verify(body, replayed)).toThrow(WebhookVerificationError);
  });

  it("a wrong secret", async () => {
    const { body, headers } = await signedDelivery(event, { secrets: [OTHER_SECRET] });
    expect(() => new Webhook(TEST_PUSH_SECRET).verify(body, headers)).toThrow("No matching signature found");
  });

  it("a stale timestamp, though signed with the right secret (the library allows 5 minutes)", async () => {
    const { body, headers } = await signedDelivery(event, { at: new Date(Date.now() - 6 * 60_000) });
    expect(() => new Webhook(TEST_PUSH_SECRET).verify(body, headers)).toThrow("Message timestamp too old");
  });
});

describe("docs/api.md#receipt-events: the app's view, from events that come at least once and in any order", () => {
  it("created then deleted: the receipt appears, then is gone", () => {
    const view = new AppView();
    const [created, deleted] = sampleEvents("user-42", "019aa8a4-3c1e");
    expect(describeOutcome(view.receive("w1", created))).toBe("user-42: +019aa8a4-3c1e (1 receipt)");
    expect(view.receiptsOf("user-42")).toEqual([
      { receipt_id: "019aa8a4-3c1e", chain_id: "c1", created_at: "2026-11-22T13:03:05.123Z", receipt: sampleReceipt() },
    ]);
    expect(describeOutcome(view.receive("w2", deleted))).toBe("user-42: −019aa8a4-3c1e (0 receipts)");
    expect(view.receiptsOf("user-42")).toEqual([]);
  });

  it("deleted then created: the receipt never appears", () => {
    const view = new AppView();
    const [created, deleted] = sampleEvents("user-42");
    expect(view.receive("w2", deleted)).toMatchObject({ kind: "deleted-unseen", count: 0 });
    expect(view.receive("w1", created)).toMatchObject({ kind: "late-created", why: "deleted", count: 0 });
    expect(view.receiptsOf("user-42")).toEqual([]);
  });

  it("a repeated webhook-id is applied once, also after the receipt was deleted", () => {
    const view = new AppView();
    const [created, deleted] = sampleEvents("user-42");
    const [second] = sampleEvents("user-42", "r-second");
    expect(view.receive("w1", created).kind).toBe("added");
    expect(view.receive("w1", created)).toEqual({ kind: "repeat", webhookId: "w1" });
    expect(view.receive("w3", second)).toMatchObject({ kind: "added", count: 2 });
    expect(view.receive("w2", deleted)).toMatchObject({ kind: "removed", count: 1 });
    expect(view.receive("w1", created).kind).toBe("repeat");
    expect(view.receiptsOf("user-42").map((receipt) => receipt.receipt_id)).toEqual(["r-second"]);
  });

  it("erased: the user is gone, a late created event of theirs stays out, a later receipt comes in", () => {
    const view = new AppView();
    const [created, , erased] = sampleEvents("user-42");
    const other = sampleEvents("user-7")[0];
    view.receive("w1", created);
    view.receive("w-other", other);
    const [late] = sampleEvents("user-42");
    const after: AppEvent = { ...sampleEvents("user-42", "r-after")[0], created_at: "2026-11-23T08:00:00.000Z" };

    expect(describeOutcome(view.receive("w-erase", erased))).toBe("user-42: erased, 1 receipt dropped (0 receipts)");
    expect(view.receiptsOf("user-42")).toEqual([]);
    expect(view.receive("w-late", late)).toMatchObject({ kind: "late-created", why: "erased" });
    expect(view.receiptsOf("user-42")).toEqual([]);
    expect(view.receive("w-after", after).kind).toBe("added");
    expect(view.receiptsOf("user-42").map((receipt) => receipt.receipt_id)).toEqual(["r-after"]);
    expect(view.receiptsOf("user-7")).toHaveLength(1);
  });

  it("erased: a receipt created after the erasure's instant that arrived before its event stays; one at the instant goes", () => {
    const view = new AppView();
    const [created, , erased] = sampleEvents("user-43");
    const atInstant: AppEvent = { ...sampleEvents("user-43", "r-at")[0], created_at: "2026-11-22T14:00:00.000Z" };
    const newer: AppEvent = { ...sampleEvents("user-43", "r-newer")[0], created_at: "2026-11-22T14:00:00.001Z" };
    for (const [id, event] of [["w1", created], ["w2", atInstant], ["w3", newer]] as const) view.receive(id, event);

    expect(describeOutcome(view.receive("w-erase", erased))).toBe("user-43: erased, 2 receipts dropped (1 receipt)");
    expect(view.receiptsOf("user-43").map((receipt) => receipt.receipt_id)).toEqual(["r-newer"]);
  });

  it("an event type it does not know is acknowledged and ignored", () => {
    const view = new AppView();
    expect(view.receive("w9", { event_id: "ev9", type: "receipt.updated" })).toEqual({ kind: "unknown-type", type: "receipt.updated" });
  });

  it("a known type without its fields is refused and its webhook-id stays unused", () => {
    const view = new AppView();
    const [created] = sampleEvents("user-42");
    const { receipt: _receipt, ...withoutBody } = created;
    expect(() => view.receive("w1", withoutBody)).toThrow(MalformedEvent);
    expect(view.receive("w1", created).kind).toBe("added");
  });
});

describe("the example receiver over a real socket, fed by the notifier's pushNotice", () => {
  let receiver: Receiver;
  const lines: string[] = [];
  let keys: CryptoKey[];

  beforeAll(async () => {
    receiver = await startReceiver({ port: 0, secret: TEST_PUSH_SECRET, log: (line) => lines.push(line) });
    keys = [await signingKey(TEST_PUSH_SECRET)];
  });
  afterAll(() => receiver.close());

  const push = (event: AppEvent, withKeys = keys, at = new Date()) =>
    pushNotice({ url: `${receiver.url}/push`, keys: withKeys }, event.event_id, JSON.stringify(event), at, PUSH_TIMEOUT_MS);
  const receiptsOf = async (appUserId: string) => {
    const response = await fetch(`${receiver.url}/app-users/${encodeURIComponent(appUserId)}/receipts`);
    expect(response.status).toBe(200);
    return ((await response.json()) as { app_user_id: string; receipts: { receipt_id: string }[] });
  };

  it("add, then delete: the receipt appears in the view, then vanishes; a repeat changes nothing", async () => {
    const [created, deleted] = sampleEvents("au-e2e");
    expect(await push(created)).toEqual({ ok: true, status: 204 });
    expect(await receiptsOf("au-e2e")).toEqual({
      app_user_id: "au-e2e",
      receipts: [{ receipt_id: created.receipt_id, chain_id: "c1", created_at: "2026-11-22T13:03:05.123Z", receipt: sampleReceipt() }],
    });
    expect(await push(deleted)).toEqual({ ok: true, status: 204 });
    expect((await receiptsOf("au-e2e")).receipts).toEqual([]);
    expect(await push(created)).toEqual({ ok: true, status: 204 });
    expect((await receiptsOf("au-e2e")).receipts).toEqual([]);
    expect(lines).toEqual([
      `au-e2e: +${created.receipt_id} (1 receipt)`,
      `au-e2e: −${created.receipt_id} (0 receipts)`,
      `webhook-id ${created.event_id} seen already: not applied again`,
    ]);
  });

  it("erased: the user's receipts are gone", async () => {
    const [created, , erased] = sampleEvents("au-erased");
    await push(created);
    expect((await receiptsOf("au-erased")).receipts).toHaveLength(1);
    expect(await push(erased)).toEqual({ ok: true, status: 204 });
    expect((await receiptsOf("au-erased")).receipts).toEqual([]);
  });

  it("a wrong secret, a stale timestamp or a tampered body: 401, which the notifier does not retry; nothing applied", async () => {
    const [created] = sampleEvents("au-forged");
    const stale = await push(created, keys, new Date(Date.now() - 10 * 60_000));
    const wrong = await push(created, [await signingKey(OTHER_SECRET)]);
    const { headers } = await signedDelivery(created);
    const tampered = await fetch(`${receiver.url}/push`, {
      method: "POST",
      headers,
      body: JSON.stringify({ ...created, app_user_id: "au-other" }),
    });
    for (const result of [stale, wrong]) expect(result).toMatchObject({ ok: false, retryable: false, error: "HTTP 401 from the push service" });
    expect(tampered.status).toBe(401);
    expect((await receiptsOf("au-forged")).receipts).toEqual([]);
    expect((await receiptsOf("au-other")).receipts).toEqual([]);
    // A forged delivery does not burn the webhook-id: the genuine one still applies.
    expect(await push(created)).toEqual({ ok: true, status: 204 });
    expect((await receiptsOf("au-forged")).receipts).toHaveLength(1);
  });

  it("a signed body that is not an event: 400, for a person rather than retries", async () => {
    const body = "not json";
    const result = await pushNotice({ url: `${receiver.url}/push`, keys }, "ev-not-json", body, new Date(), PUSH_TIMEOUT_MS);
    expect(result).toMatchObject({ ok: false, retryable: false, error: "HTTP 400 from the push service" });
  });

  it("other requests: 404 for an unknown GET, 405 for another method", async () => {
    expect((await fetch(`${receiver.url}/app-users`)).status).toBe(404);
    expect((await fetch(`${receiver.url}/push`, { method: "PUT" })).status).toBe(405);
  });
});

describe("npm run receiver: settings", () => {
  it("starts on the given port with the secret from the environment, serves, and stops on SIGTERM", async () => {
    const child = spawn(process.execPath, [path.join(ROOT, "examples/app-receiver.ts"), "--port", "0"], {
      env: { ...process.env, APP_PUSH_SECRET: TEST_PUSH_SECRET },
      stdio: ["ignore", "pipe", "pipe"],
    });
    try {
      const [chunk] = (await once(child.stdout!, "data")) as [Buffer];
      const url = /App receiver at (http:\/\/127\.0\.0\.1:\d+)/.exec(chunk.toString())?.[1];
      expect(url).toBeDefined();
      expect((await fetch(`${url}/app-users/nobody/receipts`)).status).toBe(200);
    } finally {
      child.kill("SIGTERM");
    }
    const [code] = (await once(child, "exit")) as [number | null];
    expect(code).toBe(0);
  });

  it("a bad --port: the usage and exit status 2", async () => {
    const { code, stderr } = await runReceiverCommand(["--port", "http"], { APP_PUSH_SECRET: TEST_PUSH_SECRET });
    expect(code).toBe(2);
    expect(stderr).toContain("Usage: npm run receiver");
  });

  it("--help and -h: the usage on standard output and exit 0, as every other command", async () => {
    for (const args of [["--help"], ["-h"], ["export", "--help"]]) {
      const { code, stdout, stderr } = await runReceiverCommand(args, {});
      expect(code, stderr).toBe(0);
      expect(stdout).toMatch(/^Usage: npm run receiver/);
      expect(stderr).toBe("");
    }
  });

  it("without --base-url, the service is the npm start of the state, on the port it recorded", () => {
    const state = freshState();
    mkdirSync(state, { recursive: true });
    writeFileSync(path.join(state, "npm-start.json"), `${JSON.stringify({ port: 9123, pid: process.pid })}\n`);
    expect(receiverArguments(["--persist-to", state]).baseUrl).toBe("http://127.0.0.1:9123");
    expect(receiverArguments(["--persist-to", state, "--base-url", "https://receipts.example.com/"]).baseUrl).toBe("https://receipts.example.com");
    // A record whose npm start is gone names no port: wrangler's default.
    writeFileSync(path.join(state, "npm-start.json"), `${JSON.stringify({ port: 9123, pid: 2 ** 22 + 1 })}\n`);
    expect(receiverArguments(["--persist-to", state]).baseUrl).toBe("http://127.0.0.1:8787");
  });

  it("the secret: APP_PUSH_SECRET first, else the notifier's .dev.vars as npm start writes it; never quoted in an error", () => {
    const dir = mkdtempSync(path.join(tmpdir(), "receiver-"));
    const devVars = path.join(dir, ".dev.vars");
    writeFileSync(devVars, `# Without APP_PUSH_URL ...\n# APP_PUSH_URL='http://127.0.0.1:9999/push'\nAPP_PUSH_SECRET='${TEST_PUSH_SECRET}'\n`);
    expect(pushSecret({ APP_PUSH_SECRET: OTHER_SECRET }, devVars)).toBe(OTHER_SECRET);
    expect(pushSecret({}, devVars)).toBe(TEST_PUSH_SECRET);
    expect(() => pushSecret({}, path.join(dir, "missing"))).toThrow(/APP_PUSH_SECRET is not set/);
    writeFileSync(devVars, "APP_PUSH_URL='http://127.0.0.1:9999/push'\n");
    expect(() => pushSecret({}, devVars)).toThrow(/holds none/);
  });

  it("a malformed secret stops the start, naming the setting and not its value", async () => {
    await expect(startReceiver({ port: 0, secret: "not-a-whsec-secret", log: () => {} })).rejects.toThrow(
      /^APP_PUSH_SECRET is not whsec_<base64>$/,
    );
  });
});

/**
 * One event of each type the notifier sends now or will send (docs/api.md#receipt-events), about one
 * receipt: created, deleted, and the erasure of its app user. Fresh event and receipt IDs on each
 * call, so that tests sharing a receiver never meet each other's.
 */
function sampleEvents(appUserId: string, receiptId = `r-${crypto.randomUUID().slice(0, 8)}`): [CreatedEvent, AppEvent, AppEvent] {
  const created: CreatedEvent = {
    event_id: crypto.randomUUID(),
    type: "receipt.created",
    occurred_at: "2026-11-22T13:03:05.123Z",
    receipt_id: receiptId,
    app_user_id: appUserId,
    chain_id: "c1",
    client_id: "pos_lZp9qBdscjvf",
    created_at: "2026-11-22T13:03:05.123Z",
    receipt: sampleReceipt(),
  };
  const deleted = {
    event_id: crypto.randomUUID(),
    type: "receipt.deleted",
    occurred_at: "2026-11-22T13:05:10.482Z",
    receipt_id: receiptId,
    app_user_id: appUserId,
    chain_id: "c1",
    client_id: "pos_lZp9qBdscjvf",
  } satisfies DeletionNotice;
  const erased: AppEvent = {
    event_id: crypto.randomUUID(),
    type: "app_user.erased",
    occurred_at: "2026-11-22T14:00:00.000Z",
    app_user_id: appUserId,
    receipts: 1,
  };
  return [created, deleted, erased];
}

function sampleReceipt(): Record<string, unknown> {
  return {
    purchased_at: "2026-11-22T10:15:00+01:00",
    currency: "EUR",
    total: 598,
    line_items: [{ description: "Oat milk 1 l", quantity: 2, unit_price: 299, total: 598 }],
  };
}

/**
 * A delivery as the notifier makes one: the notifier's own webhookSignature over the event's JSON,
 * with keys imported from `whsec_` secrets the way src/shared/config.ts imports them.
 */
async function signedDelivery(
  event: AppEvent,
  { secrets = [TEST_PUSH_SECRET], at = new Date() }: { secrets?: string[]; at?: Date } = {},
): Promise<{ body: string; headers: Record<"webhook-id" | "webhook-timestamp" | "webhook-signature" | "content-type", string> }> {
  const body = JSON.stringify(event);
  const timestamp = String(Math.floor(at.getTime() / 1000));
  const keys = await Promise.all(secrets.map(signingKey));
  return {
    body,
    headers: {
      "content-type": "application/json",
      "webhook-id": event.event_id,
      "webhook-timestamp": timestamp,
      "webhook-signature": await webhookSignature(keys, event.event_id, timestamp, body),
    },
  };
}

/** `npm run receiver -- <args>` as a real process, to its end, with `env` over the test's environment. */
async function runReceiverCommand(args: string[], env: Record<string, string>): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, [path.join(ROOT, "examples/app-receiver.ts"), ...args], { env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "pipe"] });
  let stdout = "";
  let stderr = "";
  child.stdout!.on("data", (chunk: Buffer) => void (stdout += chunk));
  child.stderr!.on("data", (chunk: Buffer) => void (stderr += chunk));
  const [code] = (await once(child, "exit")) as [number | null];
  return { code, stdout, stderr };
}

function signingKey(secret: string): Promise<CryptoKey> {
  const bytes = Uint8Array.from(atob(secret.slice("whsec_".length)), (char) => char.charCodeAt(0));
  return crypto.subtle.importKey("raw", bytes, { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
}

describe("docs/api.md#event-feed: the example receiver catches up through the feed of the real API Worker when it starts", () => {
  const state = freshState();
  const cursorFile = path.join(state, "cursor");
  let mf: Miniflare;
  let baseUrl: string;
  let pos: { clientId: string; token: string; chain: string };
  let app: { clientId: string; clientSecret: string };

  beforeAll(async () => {
    // Each catch-up here waits out the feed's tail first: the shortest the service allows.
    mf = startApiWorker(state, { settings: { FEED_SETTLE_SECONDS: String(MIN_FEED_SETTLE_SECONDS) } });
    baseUrl = (await mf.ready).origin;
    const clients = await mf.getKVNamespace("CLIENTS");
    const posClient = await newClientRecord({ client_id: "pos-feed", chains: ["c1"] });
    const appClient = await newClientRecord({ client_id: "app-feed", chains: [], scopes: [APP_SCOPE] });
    for (const { record } of [posClient, appClient]) await clients.put(clientKey(record.client_id), JSON.stringify(record));
    const login = await mf.dispatchFetch(`${baseUrl}/receipts/v2/login`, {
      method: "POST",
      headers: { client_id: "pos-feed", client_secret: posClient.secret, token_type: "Bearer", scope: "service.pos" },
    });
    pos = { clientId: "pos-feed", token: ((await login.json()) as { data: { access_token: string } }).data.access_token, chain: "c1" };
    app = { clientId: "app-feed", clientSecret: appClient.secret };
  }, 60_000);
  afterAll(() => mf?.dispose());

  async function add(appUserId: string): Promise<string> {
    const response = await mf.dispatchFetch(`${baseUrl}/receipts/v2/add`, {
      method: "POST",
      headers: { Authorization: `Bearer ${pos.token}`, client_id: pos.clientId, chain_id: pos.chain, app_user_id: appUserId, "Content-Type": "application/json" },
      body: JSON.stringify(sampleReceipt()),
    });
    const body = (await response.json()) as { data: { receipt_id: string } };
    expect(response.status).toBe(200);
    return body.data.receipt_id;
  }

  async function remove(appUserId: string, receiptId: string): Promise<void> {
    const response = await mf.dispatchFetch(`${baseUrl}/receipts/v2/delete`, {
      method: "POST",
      headers: { Authorization: `Bearer ${pos.token}`, client_id: pos.clientId, chain_id: pos.chain, app_user_id: appUserId, receipt_id: receiptId },
    });
    await response.arrayBuffer();
    expect(response.status).toBe(200);
  }

  // The feed holds back its newest seconds (docs/api.md#event-feed, "The tail"): a catch-up
  // reads what was made before them.
  function settled(): Promise<void> {
    return new Promise((resolve) => setTimeout(resolve, MIN_FEED_SETTLE_SECONDS * 1000 + 100));
  }

  async function start(lines: string[]): Promise<Receiver> {
    return startReceiver({
      port: 0,
      secret: TEST_PUSH_SECRET,
      feed: { baseUrl, clientId: app.clientId, clientSecret: app.clientSecret, cursorFile },
      log: (line) => lines.push(line),
    });
  }

  it("a first start rebuilds from the feed; a restart after missing events shows them, from the cursor it kept", async () => {
    const first = await add("user-feed");
    await settled();
    const firstLines: string[] = [];
    const before = await start(firstLines);
    expect(before.view.receiptsOf("user-feed").map((receipt) => receipt.receipt_id)).toEqual([first]);
    expect(before.view.receiptsOf("user-feed")[0]!.receipt).toEqual(sampleReceipt());
    expect(firstLines.at(-1)).toMatch(/^caught up through the event feed: 1 event, last 0/);
    const cursor = readFileSync(cursorFile, "utf8").trim();
    await before.close();

    // Missed while the receiver was down: a new receipt, and the first one's deletion.
    const second = await add("user-feed");
    await remove("user-feed", first);
    await settled();
    const lines: string[] = [];
    const after = await start(lines);
    expect(after.view.receiptsOf("user-feed").map((receipt) => receipt.receipt_id)).toEqual([second]);
    expect(lines).toEqual([
      `feed: user-feed: +${second} (1 receipt)`,
      // This receiver never saw the first receipt: its memory went with the restart.
      `feed: ${describeOutcome({ kind: "deleted-unseen", appUserId: "user-feed", receiptId: first, count: 1 })}`,
      expect.stringMatching(/^caught up through the event feed: 2 events, last /),
    ]);
    expect(readFileSync(cursorFile, "utf8").trim()).not.toBe(cursor);
    await after.close();
  }, 60_000);

  it("a cursor the feed no longer knows (its event erased or aged out) starts the catch-up again from the window start", async () => {
    const receiptId = await add("user-lost-cursor");
    await settled();
    const lostCursor = path.join(state, "lost-cursor");
    // Shaped as an event_id, naming none: what the feed answers for an erased event too.
    writeFileSync(lostCursor, `${crypto.randomUUID().replace(/^(.{14})./, (head) => `${head.slice(0, 14)}7`)}\n`);
    const view = new AppView();
    const caughtUp = await catchUp({ baseUrl, clientId: app.clientId, clientSecret: app.clientSecret, cursorFile: lostCursor }, (event) =>
      view.receive(event.event_id, event),
    );
    expect(view.receiptsOf("user-lost-cursor").map((receipt) => receipt.receipt_id)).toEqual([receiptId]);
    expect(readFileSync(lostCursor, "utf8").trim()).toBe(caughtUp.cursor);
  }, 60_000);

  it("a feed it cannot reach is logged, and the receiver takes pushes all the same", async () => {
    const lines: string[] = [];
    const receiver = await startReceiver({
      port: 0,
      secret: TEST_PUSH_SECRET,
      feed: { baseUrl, clientId: app.clientId, clientSecret: "wrong", cursorFile: path.join(state, "other-cursor") },
      log: (line) => lines.push(line),
    });
    expect(lines).toEqual([expect.stringMatching(/^could not catch up through the event feed: login as the app client answered 403/)]);
    await receiver.close();
  });
});

describe("npm run receiver -- export | forget: arguments", () => {
  const env = { APP_CLIENT_ID: "app-1", APP_CLIENT_SECRET: "secret" };
  it.each([
    ["no app_user_id", ["export"], env, /export: no app_user_id given/],
    ["two app_user_ids", ["forget", "u-1", "u-2"], env, /unexpected argument u-2/],
    ["--out with forget", ["forget", "u-1", "--out", "file"], env, /--out goes with export only/],
    ["--out without a file name", ["export", "u-1", "--out", ""], env, /--out needs a file name/],
    ["an unknown flag", ["export", "u-1", "--force"], env, /Unknown option '--force'/],
    ["no app client", ["export", "u-1"], {}, /export needs the app client: set APP_CLIENT_ID and APP_CLIENT_SECRET/],
  ] as const)("%s: refused", (_label, args, environment, message) => {
    expect(() => appUserArguments([...args], environment)).toThrow(message);
  });

  it("the app client and the service's address: from the environment and --base-url", () => {
    expect(appUserArguments(["export", "u-1", "--out", "u-1.ndjson", "--base-url", "http://127.0.0.1:9000/"], env)).toEqual({
      command: "export",
      appUserId: "u-1",
      out: "u-1.ndjson",
      client: { baseUrl: "http://127.0.0.1:9000", clientId: "app-1", clientSecret: "secret" },
    });
  });

  it("a bad command line of the real process: the usage and exit status 2", async () => {
    const { code, stderr } = await runReceiverCommand(["forget"], env);
    expect(code).toBe(2);
    expect(stderr).toContain("npm run receiver -- forget <app_user_id>");
  });
});

describe("docs/api.md#jobs: the example receiver exports and forgets one app user through the real API Worker", () => {
  const state = freshState();
  let mf: Miniflare;
  let client: { baseUrl: string; clientId: string; clientSecret: string };
  let token: string;
  const polling = { pollMs: 200 };

  beforeAll(async () => {
    // The export waits for adds in flight at its instant: the shortest wait the service allows.
    mf = startApiWorker(state, { settings: { FEED_SETTLE_SECONDS: String(MIN_FEED_SETTLE_SECONDS) } });
    const baseUrl = (await mf.ready).origin;
    const clients = await mf.getKVNamespace("CLIENTS");
    const posClient = await newClientRecord({ client_id: "pos-jobs", chains: ["c1"] });
    const appClient = await newClientRecord({ client_id: "app-jobs", chains: [], scopes: [APP_SCOPE] });
    for (const { record } of [posClient, appClient]) await clients.put(clientKey(record.client_id), JSON.stringify(record));
    const posLogin = await fetch(`${baseUrl}/receipts/v2/login`, {
      method: "POST",
      headers: { client_id: "pos-jobs", client_secret: posClient.secret, token_type: "Bearer", scope: "service.pos" },
    });
    token = ((await posLogin.json()) as { data: { access_token: string } }).data.access_token;
    client = { baseUrl, clientId: "app-jobs", clientSecret: appClient.secret };
  }, 60_000);
  afterAll(() => mf?.dispose());

  async function add(appUserId: string, body: string, contentType = "application/json"): Promise<string> {
    const response = await fetch(`${client.baseUrl}/receipts/v2/add`, {
      method: "POST",
      headers: { Authorization: `Bearer ${token}`, client_id: "pos-jobs", chain_id: "c1", app_user_id: appUserId, "Content-Type": contentType },
      body,
    });
    const answer = (await response.json()) as { data: { receipt_id: string } };
    expect(response.status).toBe(200);
    return answer.data.receipt_id;
  }

  it("export: every receipt of the app user once, a DR Retail one with its format and original, nothing of another; forget erases them and takes the file", async () => {
    const ours = await add("user-jobs", JSON.stringify(sampleReceipt()));
    const { body: drBody } = drRetailReceipt(1500, "dr-jobs-1");
    const dr = await add("user-jobs", JSON.stringify(drBody), drRetailContentType("1.1"));
    await add("user-jobs-other", JSON.stringify(sampleReceipt()));
    const out = path.join(state, "user-jobs.ndjson");

    const printed = await runAppUserCommand({ command: "export", appUserId: "user-jobs", out, client }, polling);
    expect(printed).toMatch(/^exported "user-jobs": 2 receipts \(0 archived\) and 0 audit records as of \S+ to \S+; job (\S+)\n$/);
    const jobId = /job (\S+)\n$/.exec(printed)![1]!;
    const lines = readFileSync(out, "utf8").trimEnd().split("\n").map((line) => JSON.parse(line) as Record<string, any>);
    const byId = new Map(lines.filter((line) => "receipt_id" in line).map((line) => [line.receipt_id as string, line]));
    expect([...byId.keys()].sort()).toEqual([ours, dr].sort());
    expect(byId.get(ours)).toMatchObject({ chain_id: "c1", client_id: "pos-jobs", archived: false, receipt: sampleReceipt() });
    expect(byId.get(ours)).not.toHaveProperty("original");
    expect(byId.get(dr)).toMatchObject({ format: drRetailFormat("1.1"), original: drBody, receipt: { pos_receipt_number: "dr-jobs-1" } });
    expect(lines.at(-1)).toEqual({ summary: expect.objectContaining({ job_id: jobId, receipts: 2, by_chain: { c1: 2 } }) });
    expect(lines).toHaveLength(3);

    // The real process, as an app's backend would run it.
    const { code, stdout, stderr } = await runReceiverCommand(["forget", "user-jobs", "--base-url", client.baseUrl], {
      APP_CLIENT_ID: client.clientId,
      APP_CLIENT_SECRET: client.clientSecret,
    });
    expect(code, stderr).toBe(0);
    expect(stdout).toMatch(/^forgot "user-jobs": 2 receipts erased as of \S+; job \S+\n$/);

    // The earlier export's file went with the erasure; a new export finds nothing.
    const appToken = await login(client);
    const gone = await fetch(`${client.baseUrl}/receipts/v2/jobs/${jobId}/export`, { headers: { Authorization: `Bearer ${appToken}`, client_id: client.clientId } });
    expect(gone.status).toBe(404);
    await gone.arrayBuffer();
    const after = await runAppUserCommand({ command: "export", appUserId: "user-jobs", client }, polling);
    expect(after.trimEnd().split("\n").map((line) => JSON.parse(line))).toEqual([{ summary: expect.objectContaining({ receipts: 0, audit_records: 0 }) }]);
  }, 120_000);
});
