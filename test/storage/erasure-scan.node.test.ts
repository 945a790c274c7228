/**
 * docs/storage.md#personal-data and "Erasure and freed bytes", docs/api.md#archive: an erasure proven by reading
 * every byte of every local store. Both Workers run as `npm run build` makes them, in the soak's
 * runtime (soak/runtime.ts: two shards, the notifier, the archive's bucket, the Workflows, all
 * persisted to one directory), and the app user is put in every store at once: live and archived
 * receipts on both shards, deleted ones of each kind, keyed adds, delivered, undelivered and
 * dead-lettered events. Their erasure runs as the service's Workflow, held at each of its steps
 * while adds, keyed adds, a keyed retry and deletes of live and archived receipts race it. Then
 * every file of the state is read for the app_user_id in each of its forms
 * (harness/state-scan.ts): only the erasure's own event and the receipts added after its instant
 * may hold it; after a second erasure, only that erasure's event.
 */
import { setTimeout as sleep } from "node:timers/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { receiptBody } from "../../harness/bodies.ts";
import type { HarnessClient } from "../../harness/miniflare.ts";
import { afterErasure, findings, firstLayoutRename, scanState, summarise, type Explain, type StateScan } from "../../harness/state-scan.ts";
import { runJob } from "../../soak/erasure.ts";
import { Prng } from "../../soak/prng.ts";
import { ARCHIVE_PATH, ERASE_PATH, SPAN_PATH, STEPS_PATH } from "../../soak/protocol.ts";
import { startPushReceiver, type PushReceiver } from "../../soak/receiver.ts";
import { SOAK_TILL_TIER, SOAK_VARS, buildSoakBundles, startSoakRuntime, type SoakRuntime } from "../../soak/runtime.ts";
import { drain } from "../../soak/store.ts";
import { archivedReceipts, legacyObjectKey, shardOfObjectKey } from "../../src/storage/archive/layout.ts";
import { readObject } from "../../src/storage/archive/objects.ts";
import type { ArchiveRun } from "../../src/storage/archive/move.ts";
import type { Erasure } from "../../src/storage/erasure.ts";
import { statement } from "../../src/storage/statement.ts";
import { PATHS, jobPath } from "../../src/shared/paths.ts";
import { shardOfId } from "../../src/shared/shard-ids.ts";
import { APP_SCOPE, POS_SCOPE } from "../../src/shared/types.ts";

// Quotes, a space and a backslash: its raw, URL-encoded and JSON-escaped forms all differ.
const ERASED = 'scan "erased" user\\42';
// Put in every store beside it and never erased: the scan must find them where the erased one was.
const KEPT = 'scan "kept" user\\42';
const BODY = JSON.parse(receiptBody(600)) as Record<string, unknown>;
const DRAIN_PERIOD_MS = 500;
const DRAIN_LIMIT_MS = 120_000;

let runtime: SoakRuntime;
let receiver: PushReceiver;
let client: HarnessClient;
let token = "";
let serial = 0;
/** When the archive's runs had renamed the first layout, before any erasure. */
let renamedBefore = 0;
/** The app's export of the erased app user, made before the erasure. */
let exportJob = "";
/** Receipts of the erased app user left for the racing deletes, live and archived. */
const live: string[] = [];
const archived: string[] = [];
/** A keyed add of the erased app user made before the erasure, for a keyed retry racing it. */
let keyed: { key: string; marker: string } | undefined;

interface Answer {
  status: number;
  receiptId?: string;
}

async function post(path: string, headers: Record<string, string>, body?: string): Promise<{ status: number; json: unknown }> {
  const response = await fetch(runtime.apiUrl + path, { method: "POST", headers, ...(body !== undefined && { body }) });
  return { status: response.status, json: await response.json().catch(() => undefined) };
}

function userHeaders(appUserId: string): Record<string, string> {
  return { authorization: `Bearer ${token}`, client_id: client.clientId, chain_id: client.chainId, app_user_id: appUserId };
}

async function add(appUserId: string, key?: string, marker = `scan-${(serial += 1)}`): Promise<Answer> {
  const headers = { ...userHeaders(appUserId), "content-type": "application/json", ...(key && { "idempotency-key": key }) };
  const { status, json } = await post(PATHS.add, headers, JSON.stringify({ ...BODY, pos_receipt_number: marker }));
  const receiptId = (json as { data?: { receipt_id?: string } } | undefined)?.data?.receipt_id;
  return { status, ...(receiptId && { receiptId }) };
}

async function addKeyed(appUserId: string): Promise<Answer & { key: string; marker: string }> {
  serial += 1;
  const [key, marker] = [`scan-key-${serial}`, `scan-keyed-${serial}`];
  return { ...(await add(appUserId, key, marker)), key, marker };
}

async function remove(appUserId: string, receiptId: string): Promise<Answer> {
  return { status: (await post(PATHS.delete, { ...userHeaders(appUserId), receipt_id: receiptId })).status, receiptId };
}

/** Adds `count` receipts of the app user, half of them keyed; returns their IDs. */
async function addSome(appUserId: string, count: number): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < count; i += 1) {
    const answer = i % 2 === 0 ? await add(appUserId) : await addKeyed(appUserId);
    expect(answer.status).toBe(200);
    ids.push(answer.receiptId!);
    if (appUserId === ERASED && i % 2 === 1) keyed ??= answer as Answer & { key: string; marker: string };
  }
  return ids;
}

async function rows(sql: string): Promise<number> {
  let total = 0;
  for (const { binding } of runtime.shards) total += ((await runtime.sql(binding, [statement(sql)]))[0]!.results[0] as { n: number }).n;
  return total;
}

async function until(condition: () => Promise<boolean>, what: string, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`still waiting for ${what}`);
    await sleep(200);
  }
}

async function steps(order?: { hold?: boolean; release?: string }): Promise<string[]> {
  const response = await fetch(`${runtime.apiUrl}${STEPS_PATH}`, order ? { method: "POST", body: JSON.stringify(order) } : {});
  return ((await response.json()) as { held: string[] }).held;
}

/**
 * The erasure of ERASED as its Workflow, held before each of its steps (and its parts' steps)
 * while an add, a keyed add, a keyed retry and deletes of a live and an archived receipt of that
 * app user race it; returns the erasure and the steps raced.
 */
async function eraseRacing(): Promise<{ erasure: Erasure; raced: Map<string, number[]> }> {
  await steps({ hold: true });
  const raced = new Map<string, number[]>();
  try {
    const started = await fetch(`${runtime.apiUrl}${ERASE_PATH}`, { method: "POST", body: JSON.stringify({ app_user_id: ERASED }) });
    const { id } = (await started.json()) as { id: string };
    for (;;) {
      const status = (await (await fetch(`${runtime.apiUrl}${ERASE_PATH}?id=${encodeURIComponent(id)}`)).json()) as {
        status: string;
        output?: Erasure;
        error?: { message: string };
      };
      if (status.status === "complete") return { erasure: status.output!, raced };
      if (status.status === "errored" || status.status === "terminated") {
        throw new Error(`the erasure ${status.status} (${status.error?.message}) after racing ${[...raced.keys()].join(", ")}`);
      }
      for (const held of await steps()) {
        const answers = await Promise.all([
          add(ERASED),
          addKeyed(ERASED),
          keyed ? add(ERASED, keyed.key, keyed.marker) : add(ERASED),
          live.length > 0 ? remove(ERASED, live.pop()!) : add(ERASED),
          archived.length > 0 ? remove(ERASED, archived.pop()!) : add(ERASED),
        ]);
        raced.set(held.slice(held.indexOf(" ") + 1), answers.map(({ status }) => status));
        await steps({ release: held });
      }
      await sleep(50);
    }
  } finally {
    await steps({ hold: false });
  }
}

function either(...explains: Explain[]): Explain {
  return (row) => explains.map((explain) => explain(row)).find((why) => why !== undefined);
}

/** Lets every event reach the receiver (or a dead letter be replayed), then reads the state for ERASED. */
async function scanAfter(erasure: Erasure): Promise<StateScan> {
  const drained = await drain(runtime, DRAIN_PERIOD_MS, DRAIN_LIMIT_MS);
  expect(drained.complete).toBe(true);
  const scan = scanState(runtime.stateDir, ERASED, either(afterErasure(erasure.event), firstLayoutRename(ERASED, renamedBefore)));
  // Shown with a failure: what was read, and what the explained rows and freed bytes were.
  const { findings: found, ...figures } = summarise(scan);
  console.log({ ...figures, findings: found.length, explained: scan.explainedRows.map(({ table, why }) => `${table}: ${why}`) });
  return scan;
}

/** Moves every other object of the app user to the key the archive's first layout gave it; returns how many. */
async function toFirstLayout(appUserId: string): Promise<number> {
  const bucket = await runtime.archive();
  const { objects } = await bucket.list();
  let moved = 0;
  for (const { key } of objects) {
    const { text } = await readObject(bucket, key);
    const [line] = archivedReceipts(text);
    if (line?.app_user_id !== appUserId || (moved += 1) % 2 === 0) continue;
    await bucket.put(legacyObjectKey(appUserId, line.chain_id, line.receipt_id, shardOfObjectKey(key)), text);
    await bucket.delete(key);
  }
  return Math.ceil(moved / 2);
}

/** The app push service's client's headers, logged in. */
async function appHeaders(): Promise<Record<string, string>> {
  const app = await runtime.issueAppClient("scan-app");
  const login = await post(PATHS.login, { client_id: app.clientId, client_secret: app.secret, token_type: "Bearer", scope: APP_SCOPE });
  return { authorization: `Bearer ${(login.json as { data: { access_token: string } }).data.access_token}`, client_id: app.clientId };
}

/** An export of the app user through the API, to its end; returns its job's ID. */
async function exportThroughTheApp(appUserId: string): Promise<string> {
  const headers = await appHeaders();
  const started = await post(PATHS.exportAppUser, { ...headers, app_user_id: appUserId, "idempotency-key": `scan-export-${appUserId.length}` });
  expect(started.status).toBe(202);
  const jobId = (started.json as { data: { job_id: string } }).data.job_id;
  await until(async () => {
    const job = await fetch(runtime.apiUrl + jobPath(jobId), { headers });
    return ((await job.json()) as { data: { state: string } }).data.state === "complete";
  }, "the export", 120_000);
  const file = await fetch(runtime.apiUrl + jobPath(jobId, "export"), { headers });
  expect(file.status).toBe(200);
  expect(await file.text()).toContain(JSON.stringify(appUserId).slice(1, -1));
  return jobId;
}

beforeAll(async () => {
  const secret = `whsec_${Buffer.from(crypto.getRandomValues(new Uint8Array(32))).toString("base64")}`;
  receiver = await startPushReceiver({ secret, prng: new Prng(31), pushTimeoutMs: Number(SOAK_VARS.notifier.PUSH_TIMEOUT_SECONDS) * 1000 });
  runtime = await startSoakRuntime(buildSoakBundles(), receiver.url, secret);
  // On the soak tills' tier: the standard tier's add limit, lowered in the soak, would refuse the racing adds.
  client = await runtime.issueClient("scan-till", "scan-chain", SOAK_TILL_TIER);
  const login = await post(PATHS.login, { client_id: client.clientId, client_secret: client.secret, token_type: "Bearer", scope: POS_SCOPE });
  token = (login.json as { data: { access_token: string } }).data.access_token;

  // Receipts bound for the archive, a delete among them; their events delivered.
  const toArchive = await addSome(ERASED, 14);
  await addSome(KEPT, 4);
  expect((await remove(ERASED, toArchive.pop()!)).status).toBe(200);
  expect((await drain(runtime, DRAIN_PERIOD_MS, DRAIN_LIMIT_MS)).complete).toBe(true);
  for (const { name } of runtime.shards) {
    expect((await runJob<ArchiveRun>(runtime, ARCHIVE_PATH, { shard: name })).complete).toBe(true);
  }
  expect(await rows("SELECT count(*) AS n FROM receipts")).toBe(0);
  // Half the app user's objects as the archive's first layout named them, by the app_user_id.
  expect(await toFirstLayout(ERASED)).toBeGreaterThan(0);
  // An archived receipt deleted before the erasure, in either layout; then the archive's runs
  // rename the first layout, as the erasure waits for; the rest left for the racing deletes.
  expect((await remove(ERASED, toArchive.pop()!)).status).toBe(200);
  for (const { name } of runtime.shards) {
    expect((await runJob<ArchiveRun>(runtime, ARCHIVE_PATH, { shard: name })).complete).toBe(true);
  }
  renamedBefore = Date.now();
  archived.push(...toArchive);

  // Live receipts, one deleted; then events the push service refuses for good (dead letters) and
  // events it cannot take yet (undelivered while the erasure runs).
  live.push(...(await addSome(ERASED, 12)));
  await addSome(KEPT, 4);
  expect((await remove(ERASED, live.pop()!)).status).toBe(200);
  receiver.setRefusing(true);
  await addSome(ERASED, 2);
  await until(async () => (await rows("SELECT count(*) AS n FROM failed_notices")) >= 2, "two dead letters");
  receiver.setRefusing(false);
  receiver.setOutage(true);
  await addSome(ERASED, 2);

  // The app's client exports the app user: their export's file is in the archive's bucket too.
  exportJob = await exportThroughTheApp(ERASED);

  // Every store holds the app user now, on both shards.
  const shards = new Set([...live, ...archived].map((id) => shardOfId(runtime.shards, id)?.name));
  expect([...shards].sort()).toEqual(runtime.shards.map(({ name }) => name).sort());
}, 600_000);

afterAll(async () => {
  await runtime?.dispose();
  await receiver?.close();
});

describe("docs/storage.md#personal-data an erasure leaves no copy of the app_user_id in any byte of any store", () => {
  it("raced at each of its steps, the erasure leaves the ID only in its own event and in receipts added after its instant", async () => {
    const { erasure, raced } = await eraseRacing();
    console.log("steps raced (statuses: add, keyed add, keyed retry, live delete, archived delete):", Object.fromEntries(raced));
    receiver.setOutage(false);
    // Held and raced: the erasure's first and last steps, and a shard's page in its part.
    expect([...raced.keys()]).toEqual(expect.arrayContaining(["begin", "record and send", expect.stringMatching(/^erase s1 page 0$/)]));
    // Every add stored or replayed its receipt; a delete found its receipt, or found it fenced or erased.
    for (const [step, [addStatus, keyedStatus, retryStatus, ...deletes]] of raced) {
      expect([addStatus, keyedStatus, retryStatus], step).toEqual([200, 200, 200]);
      for (const status of deletes) expect([200, 406], step).toContain(status);
    }
    const scan = await scanAfter(erasure);
    expect(findings(scan)).toEqual([]);
    expect(scan.explainedRows.map(({ why }) => why)).toContain("the erasure's own app_user.erased event");
    // The export's file went with the erasure: its job is still the app's, its file no more.
    const file = await fetch(runtime.apiUrl + jobPath(exportJob, "export"), { headers: await appHeaders() });
    expect(file.status).toBe(404);
    await file.arrayBuffer();
  }, 600_000);

  it("the scan finds the app user kept beside it in D1's rows and the archive's objects: it reads every store the erased one was in", () => {
    const scan = scanState(runtime.stateDir, KEPT);
    expect([...new Set(scan.unexplainedRows.map(({ table }) => table))]).toEqual(expect.arrayContaining(["receipts", "notice_outbox", "idempotency_keys"]));
    // Only in the archive's objects, stored deflated: found once the scan inflates them.
    const inR2 = scan.fileCopies.filter(({ file }) => file.startsWith("r2/"));
    expect(inR2.length).toBeGreaterThan(0);
    expect(inR2.every(({ form }) => form.endsWith(", deflated"))).toBe(true);
  });

  it("a second erasure, with nothing racing it, leaves the ID in its own event alone, beside the spans of the rename before the first", async () => {
    const erasure = await runJob<Erasure>(runtime, ERASE_PATH, { app_user_id: ERASED });
    const scan = await scanAfter(erasure);
    expect(findings(scan)).toEqual([]);
    expect(new Set(scan.explainedRows.map(({ why }) => why))).toEqual(
      new Set(["the erasure's own app_user.erased event", "a span of the first layout's rename, before any erasure"]),
    );
  }, 600_000);

  it("the scan reads the trace store: a value a binding call names on purpose is found in a span there", async () => {
    const value = 'scan "span" user\\42';
    const answer = await fetch(`${runtime.apiUrl}${SPAN_PATH}`, { method: "POST", body: JSON.stringify({ value }) });
    expect(await answer.json()).toEqual({ found: false });
    // The runtime writes its spans in batches, shortly after the call.
    await until(async () => scanState(runtime.stateDir, value).unexplainedRows.some(({ table }) => table === "spans"), "the span in the trace store", 30_000);
    const found = scanState(runtime.stateDir, value).unexplainedRows.filter(({ table }) => table === "spans");
    expect(found.map(({ database }) => database.split("/")[0])).toContain("observability");
    expect(findings(scanState(runtime.stateDir, value)).length).toBeGreaterThan(0);
  });
});
