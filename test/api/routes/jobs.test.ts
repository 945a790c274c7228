/**
 * docs/api.md#jobs: the app push service's client exports an app user's data and erases them
 * through the API, follows each job, and fetches the export's file; every error row of the two
 * starts and of the reads.
 */
import { introspectWorkflow } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PATHS, jobPath } from "../../../src/shared/paths.ts";
import { drRetailContentType } from "../../../src/shared/dr-retail-profiles.ts";
import { APP_SCOPE, OPS_SCOPE, POS_SCOPE } from "../../../src/shared/types.ts";
import { exportPrefix } from "../../../src/storage/export.ts";
import { call, expectErrorShape, issueClient, loginHeadersFor, newCaller, postAdd, uniqueId, validReceiptBody, type Answer, type Caller } from "../../support/api.ts";
import { archiveReceipt } from "../../support/archive.ts";
import { drTestReceipts } from "../../support/dr-retail.ts";
import { deleteHeadersFor } from "../../support/notices.ts";
import { SHARDS, rowsOnEveryShard } from "../../support/shards.ts";

/** A logged-in client with one scope, and the two headers every job call carries. */
async function clientWith(scope: string): Promise<{ clientId: string; headers: Record<string, string> }> {
  const client = await issueClient({ chains: scope === POS_SCOPE ? ["c1"] : [], scopes: [scope], clientId: uniqueId(scope === APP_SCOPE ? "app" : "other") });
  const login = await call(PATHS.login, { headers: { ...loginHeadersFor(client), scope } });
  return { clientId: client.clientId, headers: { Authorization: `Bearer ${login.body.data.access_token}`, client_id: client.clientId } };
}

function start(kind: "export" | "erase", headers: Record<string, string>, appUserId?: string, key: string | null = uniqueId("key")): Promise<Answer> {
  return call(kind === "export" ? PATHS.exportAppUser : PATHS.eraseAppUser, {
    headers: { ...headers, ...(appUserId !== undefined && { app_user_id: appUserId }), ...(key !== null && { "Idempotency-Key": key }) },
  });
}

async function untilDone(headers: Record<string, string>, jobId: string): Promise<Record<string, any>> {
  for (let tries = 0; tries < 200; tries += 1) {
    const answer = await call(jobPath(jobId), { method: "GET", headers });
    expect(answer.status).toBe(200);
    if (answer.body.data.state !== "running") return answer.body.data;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`job ${jobId} still running`);
}

async function fileOf(headers: Record<string, string>, jobId: string): Promise<{ status: number; type: string | null; lines: any[] }> {
  const answer = await call(jobPath(jobId, "export"), { method: "GET", headers });
  const text = typeof answer.body === "string" ? answer.body : JSON.stringify(answer.body);
  return { status: answer.status, type: answer.headers.get("content-type"), lines: text.split("\n").filter(Boolean).map((line) => JSON.parse(line)) };
}

let app: { clientId: string; headers: Record<string, string> };
let pos: Caller;
let everyExport: Awaited<ReturnType<typeof introspectWorkflow>>;
let everyErasure: Awaited<ReturnType<typeof introspectWorkflow>>;

beforeAll(async () => {
  app = await clientWith(APP_SCOPE);
  pos = await newCaller({ chains: ["c1", "c2"] });
  // The export waits until adds in flight at its instant have committed: here, at once.
  everyExport = await introspectWorkflow(env.EXPORT);
  await everyExport.modifyAll(async (m) => {
    await m.mockStepResult({ name: "settle" }, true);
    await m.disableRetryDelays();
  });
  everyErasure = await introspectWorkflow(env.ERASURE);
  await everyErasure.modifyAll((m) => m.disableRetryDelays());
});

afterAll(async () => {
  await everyExport?.dispose();
  await everyErasure?.dispose();
});

/** An app user with live receipts in two chains, one of them in DR Retail, archived ones on two shards, and one deleted. */
async function userWithEverything(appUserId: string): Promise<{ live: string[]; archived: string[]; dr: string; deleted: string }> {
  const added: string[] = [];
  for (const chain of ["c1", "c2", "c1", "c2", "c1", "c1"]) {
    const answer = await postAdd({ ...pos.headers, chain_id: chain, app_user_id: appUserId });
    expect(answer.status).toBe(200);
    added.push(answer.body.data.receipt_id);
  }
  const drBody = drTestReceipts()[0]!;
  const dr = await postAdd({ ...pos.headers, app_user_id: appUserId, "Content-Type": drRetailContentType(drBody.version) }, drBody.body);
  expect(dr.status).toBe(200);
  const deleted = added.pop()!;
  expect((await call(PATHS.delete, { headers: deleteHeadersFor(pos.token, { receipt_id: deleted, client_id: pos.client.clientId, chain_id: "c1", app_user_id: appUserId }) })).status).toBe(200);
  const archived = added.splice(0, 2);
  for (const id of archived) await archiveReceipt(id);
  return { live: added, archived, dr: dr.body.data.receipt_id, deleted };
}

/** The export of an app user with two receipts of `text`, the second archived: their IDs, and the file's answer. */
async function exportOfTwo(appUserId: string, text: string): Promise<{ ids: string[]; answer: Answer }> {
  const ids: string[] = [];
  for (let i = 0; i < 2; i += 1) {
    const added = await postAdd({ ...pos.headers, app_user_id: appUserId }, text);
    expect(added.status).toBe(200);
    ids.push(added.body.data.receipt_id);
  }
  await archiveReceipt(ids[1]!);
  const jobId = (await start("export", app.headers, appUserId)).body.data.job_id as string;
  await untilDone(app.headers, jobId);
  return { ids, answer: await call(jobPath(jobId, "export"), { method: "GET", headers: app.headers }) };
}

describe("docs/api.md#export an app client exports an app user's data", () => {
  it("every receipt once, live and archived on every shard, in our model and for a DR one its original too, the audit records naming them, then a summary; nothing of another user", async () => {
    const shopper = uniqueId("shopper");
    const neighbour = `${shopper}-n`;
    const made = await userWithEverything(shopper);
    await userWithEverything(neighbour);
    const started = await start("export", app.headers, shopper);
    expect(started.status).toBe(202);
    expect(started.body).toEqual({ data: { job_id: expect.any(String), kind: "export", state: expect.stringMatching(/^(running|complete)$/) }, status: "Accepted", status_code: 202 });
    const jobId = started.body.data.job_id as string;
    const done = await untilDone(app.headers, jobId);
    expect(done).toMatchObject({ job_id: jobId, kind: "export", state: "complete", occurred_at: expect.any(String) });
    expect(JSON.stringify(done)).not.toContain(shopper);

    const file = await fileOf(app.headers, jobId);
    expect(file.status).toBe(200);
    expect(file.type).toBe("application/x-ndjson; charset=utf-8");
    const receipts = file.lines.filter((line) => "receipt" in line);
    const ids = receipts.map((line) => line.receipt_id).sort();
    expect(ids).toEqual([...made.live, ...made.archived, made.dr].sort());
    expect(new Set(receipts.filter((line) => line.archived).map((line) => line.receipt_id))).toEqual(new Set(made.archived));
    const dr = receipts.find((line) => line.receipt_id === made.dr)!;
    expect(dr).toMatchObject({ format: "dr-retail/v1.1", original: drTestReceipts()[0]!.body, receipt: { currency: "SEK", total: drTestReceipts()[0]!.mappedTotal } });
    expect(receipts.find((line) => line.receipt_id === made.live[0])).toMatchObject({ chain_id: "c1", client_id: pos.client.clientId, created_at: expect.any(String), receipt: validReceiptBody() });
    const audit = file.lines.filter((line) => "audit" in line);
    expect(audit).toEqual([{ audit: expect.objectContaining({ action: "receipt.deleted", receipt_id: made.deleted, client_id: pos.client.clientId }) }]);
    const summary = file.lines.at(-1);
    expect(summary).toEqual({
      summary: { job_id: jobId, occurred_at: done.occurred_at, receipts: 6, archived_receipts: 2, by_chain: { c1: 4, c2: 2 }, audit_records: 1, archive_read: true },
    });
    expect(done.counts).toEqual({ receipts: 6, archived_receipts: 2, audit_records: 1, by_chain: { c1: 4, c2: 2 }, archive_read: true });
    // The job left no hold, copy or record of what it read on any shard, and no request.
    for (const table of ["export_holds", "export_copies", "export_seen", "export_requests"]) {
      expect(await rowsOnEveryShard(`SELECT 1 FROM ${table}`), table).toEqual([]);
    }
    // The file's key names the job alone.
    const keys = (await env.ARCHIVE.list({ prefix: exportPrefix(jobId) })).objects.map(({ key }) => key);
    expect(keys.length).toBeGreaterThan(0);
    for (const key of keys) expect(key).not.toContain(shopper);
  });

  it("a receipt sent pretty-printed, with CR LF line breaks, live and archived, is one line of the file holding the same JSON value", async () => {
    const shopper = uniqueId("pretty");
    const pretty = JSON.stringify(validReceiptBody(), null, 2).replaceAll("\n", "\r\n");
    const { ids, answer } = await exportOfTwo(shopper, pretty);
    const text = typeof answer.body === "string" ? answer.body : JSON.stringify(answer.body);
    const lines = text.split("\n").filter(Boolean);
    // Two receipts and the summary, each line a JSON object of its own.
    expect(lines).toHaveLength(3);
    const receipts = lines.map((line) => JSON.parse(line)).filter((line) => "receipt" in line);
    expect(receipts.map(({ receipt_id, archived }) => [receipt_id, archived]).sort()).toEqual([
      [ids[0], false],
      [ids[1], true],
    ]);
    for (const line of receipts) expect(line.receipt).toEqual(validReceiptBody());
  });

  it("the file's lines follow the documented order: every receipt, live and archived, then the audit records, then the summary", async () => {
    const shopper = uniqueId("order");
    const added: string[] = [];
    for (let i = 0; i < 9; i += 1) {
      const answer = await postAdd({ ...pos.headers, app_user_id: shopper });
      expect(answer.status).toBe(200);
      added.push(answer.body.data.receipt_id);
    }
    // 2 live, 6 archived, and 1 archived then deleted, whose deletion leaves the audit record.
    const [live, archived, gone] = [added.slice(0, 2), added.slice(2, 8), added[8]!];
    for (const id of [...archived, gone]) await archiveReceipt(id);
    const deleted = await call(PATHS.delete, { headers: deleteHeadersFor(pos.token, { receipt_id: gone, client_id: pos.client.clientId, chain_id: "c1", app_user_id: shopper }) });
    expect(deleted.status).toBe(200);

    const jobId = (await start("export", app.headers, shopper)).body.data.job_id as string;
    await untilDone(app.headers, jobId);
    const { lines } = await fileOf(app.headers, jobId);
    const kinds = lines.map((line) => Object.keys(line).find((key) => key === "receipt" || key === "audit" || key === "summary"));
    expect(kinds).toEqual([...Array(8).fill("receipt"), "audit", "summary"]);
    const receipts = lines.slice(0, 8);
    expect(receipts.map((line) => line.receipt_id).sort()).toEqual([...live, ...archived].sort());
    expect(receipts.filter((line) => line.archived).map((line) => line.receipt_id).sort()).toEqual([...archived].sort());
    expect(lines[8]).toEqual({ audit: expect.objectContaining({ action: "receipt.deleted", receipt_id: gone }) });
    expect(lines[9].summary).toMatchObject({ receipts: 8, archived_receipts: 6, audit_records: 1 });
  }, 60_000);

  it("the file leaves with the security headers of every answer, and a receipt's raw U+2028 and U+2029 are escaped: the same JSON value on one line, even for a reader that splits on every Unicode line break", async () => {
    const shopper = uniqueId("separators");
    const body = validReceiptBody();
    body.line_items[0].description = "Oat\u2028milk\u20291 l";
    // As a till would send it: the separators raw inside the string.
    const sent = JSON.stringify(body);
    expect(sent).toContain("\u2028");
    const { ids, answer } = await exportOfTwo(shopper, sent);
    expect(answer.status).toBe(200);
    expect(answer.headers.get("x-content-type-options")).toBe("nosniff");
    expect(answer.headers.get("cache-control")).toBe("no-store");
    const text = typeof answer.body === "string" ? answer.body : JSON.stringify(answer.body);
    expect(text).not.toMatch(/[\u2028\u2029]/);
    // Python's str.splitlines cuts at these, and at \n, \r, \v, \f, \x1c-\x1e and \x85.
    const lines = text.split(/\r\n|[\n\r\v\f\x1c-\x1e\x85\u2028\u2029]/).filter(Boolean);
    expect(lines).toHaveLength(3);
    const receipts = lines.map((line) => JSON.parse(line)).filter((line) => "receipt" in line);
    expect(receipts.map((line) => line.receipt_id).sort()).toEqual([...ids].sort());
    for (const line of receipts) expect(line.receipt).toEqual(body);
  }, 60_000);

  it("the same Idempotency-Key answers the same job; another client reads neither the job nor its file", async () => {
    const shopper = uniqueId("shopper");
    const key = uniqueId("key");
    const first = await start("export", app.headers, shopper, key);
    const again = await start("export", app.headers, shopper, key);
    expect(again.status).toBe(202);
    expect(again.body.data.job_id).toBe(first.body.data.job_id);
    await untilDone(app.headers, first.body.data.job_id);
    const other = await clientWith(APP_SCOPE);
    for (const path of [jobPath(first.body.data.job_id), jobPath(first.body.data.job_id, "export")]) {
      const answer = await call(path, { method: "GET", headers: other.headers });
      expect(expectErrorShape(answer, 404, "Not Found")).toContain("Path names no job this client started");
    }
  });
});

describe("docs/api.md#jobs erasure from the app", () => {
  it("starts the same erasure as the operator's command, whose state names no user, and takes the user's export files with it", async () => {
    const shopper = uniqueId("shopper");
    const made = await userWithEverything(shopper);
    const exported = await start("export", app.headers, shopper);
    await untilDone(app.headers, exported.body.data.job_id);
    expect((await env.ARCHIVE.list({ prefix: exportPrefix(exported.body.data.job_id) })).objects.length).toBeGreaterThan(0);

    const erased = await start("erase", app.headers, shopper);
    expect(erased.status).toBe(202);
    expect(erased.body.data).toMatchObject({ kind: "erasure" });
    const done = await untilDone(app.headers, erased.body.data.job_id);
    expect(done).toMatchObject({ state: "complete", counts: { receipts_erased: made.live.length + made.archived.length + 1 } });
    expect(JSON.stringify(done)).not.toContain(shopper);
    expect((await env.ARCHIVE.list({ prefix: exportPrefix(exported.body.data.job_id) })).objects).toEqual([]);
    expect((await fileOf(app.headers, exported.body.data.job_id)).status).toBe(404);
    expect(await rowsOnEveryShard("SELECT 1 FROM receipts WHERE app_user_id = ?", shopper)).toEqual([]);
  });
});

describe("docs/api.md#jobs errors of the starts and the reads", () => {
  for (const kind of ["export", "erase"] as const) {
    it(`${kind}: 400 naming a missing app_user_id or Idempotency-Key, or a malformed app_user_id; nothing started`, async () => {
      const before = await rowsOnEveryShard("SELECT 1 FROM app_user_jobs");
      expect(expectErrorShape(await start(kind, app.headers), 400, "Bad Request")).toMatch(/Header app_user_id is missing/);
      expect(expectErrorShape(await start(kind, app.headers, uniqueId("shopper"), null), 400, "Bad Request")).toMatch(/Header Idempotency-Key is missing/);
      for (const bad of [" ", "a, b", "x".repeat(257)]) {
        expect(expectErrorShape(await start(kind, app.headers, bad), 400, "Bad Request")).toContain("Header app_user_id");
      }
      expect(await rowsOnEveryShard("SELECT 1 FROM app_user_jobs")).toEqual(before);
    });

    it(`${kind}: a POS or an ops token, 403 naming the scope; no token, 400`, async () => {
      for (const scope of [POS_SCOPE, OPS_SCOPE]) {
        const other = await clientWith(scope);
        expect(expectErrorShape(await start(kind, other.headers, uniqueId("shopper")), 403, "Forbidden")).toContain(APP_SCOPE);
      }
      expect(expectErrorShape(await start(kind, { client_id: app.clientId }, uniqueId("shopper")), 400, "Bad Request")).toContain("Authorization");
    });

    it(`${kind}: an Idempotency-Key used for another app user or kind of job, 409; other methods, 405`, async () => {
      const key = uniqueId("key");
      expect((await start(kind, app.headers, uniqueId("shopper"), key)).status).toBe(202);
      expect(expectErrorShape(await start(kind, app.headers, uniqueId("shopper"), key), 409, "Conflict")).toContain("Idempotency-Key");
      expect(expectErrorShape(await start(kind === "export" ? "erase" : "export", app.headers, uniqueId("shopper"), key), 409, "Conflict")).toContain("Idempotency-Key");
      const get = await call(kind === "export" ? PATHS.exportAppUser : PATHS.eraseAppUser, { method: "GET", headers: app.headers });
      expect(expectErrorShape(get, 405, "Method Not Allowed")).toContain("POST");
      expect(get.headers.get("allow")).toBe("POST");
    });
  }

  it("a job's reads: an unknown job, 404; the file of a job that is not a complete export, 409", async () => {
    expect(expectErrorShape(await call(jobPath(crypto.randomUUID()), { method: "GET", headers: app.headers }), 404, "Not Found")).toContain("no job");
    const erased = await start("erase", app.headers, uniqueId("shopper"));
    await untilDone(app.headers, erased.body.data.job_id);
    expect(expectErrorShape(await call(jobPath(erased.body.data.job_id, "export"), { method: "GET", headers: app.headers }), 409, "Conflict")).toContain("not a complete export");
  });

  it("every answer of the jobs' routes names its limit", async () => {
    const answer = await start("export", app.headers, uniqueId("shopper"));
    expect(answer.headers.get("ratelimit-policy")).toBe('"jobs.standard";q=100;w=10');
  });
});

// The shards the tests run on hold the receipts of both app users of a test.
expect(SHARDS.length).toBeGreaterThanOrEqual(2);
