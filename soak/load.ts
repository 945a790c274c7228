/**
 * The soak's load: POS tills, each with a client of its own, doing what tills do with a realistic
 * mix — log in, add receipts with and without an Idempotency-Key (replaying some, racing some
 * replays), delete them (some right after the add, some racing each other, some with the wrong
 * app user), and send bad requests — and recording every request with the statuses it may
 * rightly get. The shoppers are shared: every till adds for the same few app users, so that an
 * operator's erasure of one of them races the adds other tills keep sending for that user.
 */
import { setTimeout as sleep } from "node:timers/promises";
import { drRetailReceipt, receiptBody } from "../harness/bodies.ts";
import { drRetailContentType, drRetailFormat } from "../src/shared/dr-retail-profiles.ts";
import type { HarnessClient } from "../harness/miniflare.ts";
import type { ScanSummary } from "../harness/state-scan.ts";
import { PATHS } from "../src/shared/paths.ts";
import { stampShardTag } from "../src/shared/shard-ids.ts";
import { POS_SCOPE } from "../src/shared/types.ts";
import type { ExportRecord } from "./app-jobs.ts";
import type { Prng } from "./prng.ts";

export type Route = "login" | "add" | "delete";

/** One request and what came of it. */
export interface RequestRecord {
  route: Route;
  /** What the till meant by it, e.g. `add racing replay`, `delete wrong app user`. */
  action: string;
  clientId: string;
  /** ms since the epoch */
  start: number;
  end: number;
  /** The answer's status; null when none came (the connection failed or timed out). */
  status: number | null;
  /** Statuses the request may rightly get when nothing fails. */
  expected: readonly number[];
  /** add: the receipt the answer names; delete: the receipt it targets. */
  receiptId?: string;
  /** add and delete: the app user the request names. */
  appUserId?: string;
  /** add: the body's pos_receipt_number, unique per receipt the till means to store. */
  marker?: string;
  /** add: its Idempotency-Key. */
  key?: string;
  /** add answered 200: the receipt's created_at, as the answer gives it. */
  createdAt?: string;
  /** Requests sent together on purpose share a race id. */
  race?: number;
}

/** One erasure of an app user (`npm run app-users -- erase`), as an operator ran it. */
export interface ErasureRecord {
  appUserId: string;
  /** ms since the epoch: the first attempt's start, the successful attempt's end. */
  start: number;
  end: number;
  /** The app_user.erased event of the run that finished; absent when every attempt failed. */
  eventId?: string;
  /** That run's instant, its event's occurred_at. */
  occurredAt?: string;
  receiptsErased?: number;
  attempts: number;
  /** Who ran it: the operator's command, or the app's client through the API. */
  via: "operator" | "app";
  /** What reading every byte of the runtime's state for the app user found once the erasure completed. */
  scan?: ScanSummary;
}

/** What the load did, for the reconciliation. */
export interface LoadRecord {
  requests: RequestRecord[];
  /** The body text of every add, by marker. */
  bodies: Map<string, string>;
  /**
   * The adds sent in DR Retail (docs/api.md#dr-retail), by marker: the format the receipt must be
   * pushed with, and the total in minor units its model must carry.
   */
  drReceipts: Map<string, { format: string; total: number }>;
  erasures: ErasureRecord[];
  /** The exports the app side asked for during the load. */
  exports: ExportRecord[];
}

/**
 * Erasing an app user, as an operator does when a shopper asks to be forgotten, or the app
 * through the API. Given to `runLoad`, one of the shared app users is erased every `pauseMs` (a
 * range, in ms), one erasure at a time, while the tills go on adding for that user; the
 * reconciliation then holds each receipt to the erasure's instant. With `exportOf`, each erasure
 * is preceded by the export of an app user's data through the API, racing the tills' adds and
 * deletes for them.
 */
export interface AppUserErasure {
  pauseMs: readonly [number, number];
  erase(appUserId: string): Promise<ErasureRecord>;
  exportOf?(appUserId: string): Promise<ExportRecord>;
}

/** How often a till does each thing, relative to the others. */
const ACTION_WEIGHTS = {
  login: 2,
  add: 22,
  "add with key": 16,
  "add replay": 6,
  "add racing replays": 4,
  delete: 16,
  "delete right after add": 8,
  "delete racing": 4,
  "delete wrong app user": 3,
  "add bad body": 3,
  "add bad token": 2,
  "delete unknown receipt": 2,
  "login bad secret": 1,
} as const;

type Action = keyof typeof ACTION_WEIGHTS;

/**
 * The shoppers every till serves. Few enough that each gets several adds a second from the tills
 * together, so that adds for the user being erased arrive while the erasure runs.
 */
export const APP_USERS = Array.from({ length: 6 }, (_, i) => `soak-user-${i}`);
const RACERS = 3;
const REQUEST_TIMEOUT_MS = 15_000;
/** A till pauses between actions, as a till waits for its next customer (far less, here). */
const THINK_MS = [5, 40] as const;
const BASE_BODY = JSON.parse(receiptBody(1500)) as Record<string, unknown>;
/** Share of a till's receipts sent in DR Retail, half of them as v1.0 and half as v1.1. */
const DR_SHARE = 0.25;

/**
 * Runs one till per client until `until` (ms since the epoch), all at once, and returns every
 * request. `shardTags` lets a till make receipt IDs that name a real shard but no receipt.
 */
export async function runLoad(options: {
  apiUrl: string;
  clients: readonly HarnessClient[];
  prng: Prng;
  until: number;
  shardTags: readonly number[];
  erasure?: AppUserErasure;
  /** A client in a loop beside the tills: it sends adds over `connections` at once, as fast as it can. */
  flood?: { client: HarnessClient; connections: number };
}): Promise<LoadRecord> {
  const load: LoadRecord = { requests: [], bodies: new Map(), drReceipts: new Map(), erasures: [], exports: [] };
  const tills = options.clients.map((client, i) => new Till(client, options.prng.fork(`till ${i}`), options, load));
  const flood = options.flood && new Till(options.flood.client, options.prng.fork("flood"), options, load);
  await Promise.all([
    ...tills.map((till) => till.run()),
    ...(flood ? [flood.flood(options.flood!.connections)] : []),
    erasures(options, load),
  ]);
  return load;
}

/** The action of every add the flooding client sends. */
export const FLOOD_ACTION = "flood";
/** The flood's one app user, whom no erasure picks. */
const FLOOD_APP_USER = "soak-flood-user";
/** A flood's add is stored, or refused over its client's limit (docs/api.md#rate-limits). */
const FLOOD_EXPECTED = [200, 429] as const;
/** How long a flooding loop stops after a request got no answer (the runtime restarting). */
const FLOOD_NO_ANSWER_PAUSE_MS = 50;

// The operator and the app's jobs: apart from the tills, so that no till waits for an erasure or
// an export, and the adds for the user being erased or exported go on while it runs.
async function erasures(options: Parameters<typeof runLoad>[0], load: LoadRecord): Promise<void> {
  if (!options.erasure) return;
  const prng = options.prng.fork("operator");
  for (;;) {
    await sleep(prng.between(...options.erasure.pauseMs));
    if (Date.now() >= options.until) return;
    // An export holds the next restart off for seconds: none so late that a held restart would
    // fall after the load, with no push left to cut off.
    if (options.erasure.exportOf && options.until - Date.now() > EXPORT_MARGIN_MS) load.exports.push(await options.erasure.exportOf(prng.pick(APP_USERS)));
    load.erasures.push(await options.erasure.erase(prng.pick(APP_USERS)));
  }
}

/** Time the load must still have for an export during it to start. */
const EXPORT_MARGIN_MS = 15_000;

let races = 0;

class Till {
  readonly #client: HarnessClient;
  readonly #prng: Prng;
  readonly #options: Parameters<typeof runLoad>[0];
  readonly #load: LoadRecord;
  /** Receipts this till stored and has not tried to delete: receipt_id → app_user_id. */
  readonly #held = new Map<string, string>();
  /** Adds with a key that got an answer, to replay. */
  readonly #keyed: { key: string; marker: string; appUserId: string }[] = [];
  /** The Content-Type of each receipt this till sent in DR Retail, by marker, for its replays. */
  readonly #contentTypes = new Map<string, string>();
  #token = "";
  #serial = 0;

  constructor(client: HarnessClient, prng: Prng, options: Parameters<typeof runLoad>[0], load: LoadRecord) {
    this.#client = client;
    this.#prng = prng;
    this.#options = options;
    this.#load = load;
  }

  async run(): Promise<void> {
    while (Date.now() < this.#options.until) {
      if (!this.#token) await this.#login();
      else await this.#act(this.#prng.weighted(ACTION_WEIGHTS));
      await sleep(this.#prng.between(...THINK_MS));
    }
  }

  /**
   * Sends adds without a key over `connections` loops until the load ends, each as soon as the
   * one before was answered, 429 or not: a till's retry bug, or a leaked credential.
   */
  async flood(connections: number): Promise<void> {
    await Promise.all(
      Array.from({ length: connections }, async () => {
        while (Date.now() < this.#options.until) {
          if (!this.#token) await this.#login();
          else if (!(await this.#add(FLOOD_ACTION, FLOOD_APP_USER, this.#newMarker(), undefined, undefined, FLOOD_EXPECTED)).answered) {
            await sleep(FLOOD_NO_ANSWER_PAUSE_MS);
          }
        }
      }),
    );
  }

  async #act(action: Action): Promise<void> {
    const appUserId = this.#prng.pick(APP_USERS);
    switch (action) {
      case "login":
        return this.#login();
      case "add":
        return this.#hold((await this.#add(action, appUserId, this.#newMarker())).receiptId, appUserId);
      case "add with key":
        return this.#addWithKey(appUserId);
      case "add replay": {
        if (this.#keyed.length === 0) return this.#addWithKey(appUserId);
        const { key, marker, appUserId: owner } = this.#prng.pick(this.#keyed);
        return void (await this.#add(action, owner, marker, key));
      }
      case "add racing replays": {
        const key = this.#newKey();
        const marker = this.#newMarker();
        const race = ++races;
        const answers = await Promise.all(Array.from({ length: RACERS }, () => this.#add(action, appUserId, marker, key, race)));
        this.#hold(answers.find((answer) => answer.receiptId)?.receiptId, appUserId);
        this.#keyed.push({ key, marker, appUserId });
        return;
      }
      case "delete":
        return this.#deleteHeld(action);
      case "delete right after add": {
        const { receiptId } = await this.#add("add then delete", appUserId, this.#newMarker());
        if (receiptId) await this.#delete(action, receiptId, appUserId);
        return;
      }
      case "delete racing": {
        const target = this.#takeHeld();
        if (!target) return;
        const race = ++races;
        await Promise.all(Array.from({ length: 2 }, () => this.#delete(action, target[0], target[1], [200, 406], race)));
        return;
      }
      case "delete wrong app user": {
        const receiptId = this.#prng.pick([...this.#held.keys(), undefined]);
        if (!receiptId) return;
        const wrongUser = `${this.#held.get(receiptId)!}-not`;
        await this.#send({ route: "delete", action, receiptId, expected: [406] }, this.#deleteInit(receiptId, wrongUser));
        return;
      }
      case "add bad body": {
        const body = JSON.stringify({ ...BASE_BODY, total: -1, pos_receipt_number: this.#newMarker() });
        await this.#send({ route: "add", action, expected: [406] }, this.#addInit(appUserId, body));
        return;
      }
      case "add bad token": {
        const init = this.#addInit(appUserId, this.#body(this.#newMarker()));
        await this.#send({ route: "add", action, expected: [403] }, { ...init, headers: { ...init.headers, authorization: "Bearer not-a-token" } });
        return;
      }
      case "delete unknown receipt": {
        // A random UUID made version 7, on a real shard: the shape of a receipt_id, naming none.
        const uuid = crypto.randomUUID();
        const receiptId = stampShardTag(`${uuid.slice(0, 14)}7${uuid.slice(15)}`, this.#prng.pick(this.#options.shardTags));
        await this.#send({ route: "delete", action, receiptId, expected: [406] }, this.#deleteInit(receiptId, appUserId));
        return;
      }
      case "login bad secret":
        await this.#send({ route: "login", action, expected: [403, 429] }, this.#loginInit(`${this.#client.secret}x`));
        return;
    }
  }

  async #login(): Promise<void> {
    const { status, json } = await this.#send({ route: "login", action: "login", expected: [200] }, this.#loginInit(this.#client.secret));
    const token = (json as { data?: { access_token?: string } } | undefined)?.data?.access_token;
    if (status === 200 && token) this.#token = token;
  }

  // A till whose keyed add got no answer, or a 5xx, sends it again with the same key: the key is
  // what makes that safe, and the soak checks it stores the receipt once.
  async #addWithKey(appUserId: string): Promise<void> {
    const key = this.#newKey();
    const marker = this.#newMarker();
    const first = (await this.#add("add with key", appUserId, marker, key)).receiptId;
    this.#hold(first ?? (await this.#add("add with key, again after a failure", appUserId, marker, key)).receiptId, appUserId);
    this.#keyed.push({ key, marker, appUserId });
  }

  // Replays are not held: the receipt they name may have been deleted since the first answer.
  #hold(receiptId: string | undefined, appUserId: string): void {
    if (receiptId) this.#held.set(receiptId, appUserId);
  }

  /**
   * Sends an add; returns the receipt it stored or replayed (none when the answer was not 200),
   * and whether any answer came.
   */
  async #add(
    action: string,
    appUserId: string,
    marker: string,
    key?: string,
    race?: number,
    expected: readonly number[] = [200],
  ): Promise<{ receiptId?: string; answered: boolean }> {
    const { body, contentType } = this.#receipt(marker);
    const init = this.#addInit(appUserId, body, contentType);
    if (key) init.headers["idempotency-key"] = key;
    const record: Omit<RequestRecord, "start" | "end" | "status" | "clientId"> = { route: "add", action, expected, marker, appUserId, ...(key && { key }), ...(race && { race }) };
    const { status, json, request } = await this.#send(record, init);
    const data = (json as { data?: { receipt_id?: string; created_at?: string } } | undefined)?.data;
    if (status !== 200 || !data?.receipt_id) return { answered: status !== null };
    request.receiptId = data.receipt_id;
    if (data.created_at) request.createdAt = data.created_at;
    return { receiptId: data.receipt_id, answered: true };
  }

  async #deleteHeld(action: string): Promise<void> {
    const target = this.#takeHeld();
    if (target) await this.#delete(action, target[0], target[1]);
  }

  // Taken out before the delete is sent: whatever its answer, the till never deletes it again,
  // so no later delete of it can be refused for a reason the soak would have to guess.
  #takeHeld(): [string, string] | undefined {
    if (this.#held.size === 0) return undefined;
    const receiptId = this.#prng.pick([...this.#held.keys()]);
    const appUserId = this.#held.get(receiptId)!;
    this.#held.delete(receiptId);
    return [receiptId, appUserId];
  }

  async #delete(action: string, receiptId: string, appUserId: string, expected: readonly number[] = [200], race?: number): Promise<void> {
    await this.#send({ route: "delete", action, receiptId, appUserId, expected, ...(race && { race }) }, this.#deleteInit(receiptId, appUserId));
  }

  async #send(
    record: Omit<RequestRecord, "start" | "end" | "status" | "clientId">,
    init: { path: string; headers: Record<string, string>; body?: string },
  ): Promise<{ status: number | null; json: unknown; request: RequestRecord }> {
    const request: RequestRecord = { ...record, clientId: this.#client.clientId, start: Date.now(), end: 0, status: null };
    this.#load.requests.push(request);
    let json: unknown;
    try {
      const response = await fetch(this.#options.apiUrl + init.path, {
        method: "POST",
        headers: init.headers,
        ...(init.body !== undefined && { body: init.body }),
        signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
      });
      request.status = response.status;
      json = await response.json().catch(() => undefined);
    } catch {
      // No answer: the status stays null.
    }
    request.end = Date.now();
    return { status: request.status, json, request };
  }

  #loginInit(secret: string) {
    return {
      path: PATHS.login,
      headers: { client_id: this.#client.clientId, client_secret: secret, token_type: "Bearer", scope: POS_SCOPE },
    };
  }

  #addInit(appUserId: string, body: string, contentType = "application/json"): { path: string; headers: Record<string, string>; body: string } {
    return { path: PATHS.add, headers: { ...this.#tokenHeaders(appUserId), "content-type": contentType }, body };
  }

  #deleteInit(receiptId: string, appUserId: string) {
    return { path: PATHS.delete, headers: { ...this.#tokenHeaders(appUserId), receipt_id: receiptId } };
  }

  #tokenHeaders(appUserId: string): Record<string, string> {
    return { authorization: `Bearer ${this.#token}`, client_id: this.#client.clientId, chain_id: this.#client.chainId, app_user_id: appUserId };
  }

  #body(marker: string): string {
    return JSON.stringify({ ...BASE_BODY, pos_receipt_number: marker });
  }

  // The receipt of a marker: decided once, so that every replay of it sends the same request. A
  // share is in DR Retail, whose receipt number is the marker, as our model's pos_receipt_number.
  #receipt(marker: string): { body: string; contentType?: string } {
    const known = this.#load.bodies.get(marker);
    if (known !== undefined) return { body: known, contentType: this.#contentTypes.get(marker) };
    if (!this.#prng.chance(DR_SHARE)) {
      const body = this.#body(marker);
      this.#load.bodies.set(marker, body);
      return { body };
    }
    const version = this.#prng.chance(0.5) ? "1.0" : "1.1";
    const { body, total } = drRetailReceipt(1500, marker);
    const text = JSON.stringify(body);
    this.#load.bodies.set(marker, text);
    this.#load.drReceipts.set(marker, { format: drRetailFormat(version), total });
    this.#contentTypes.set(marker, drRetailContentType(version));
    return { body: text, contentType: drRetailContentType(version) };
  }

  #newMarker(): string {
    this.#serial += 1;
    return `${this.#client.clientId}-${this.#serial}`;
  }

  #newKey(): string {
    this.#serial += 1;
    return `${this.#client.clientId}-key-${this.#serial}`;
  }
}
