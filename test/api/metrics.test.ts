/**
 * docs/operations.md every API request writes one Analytics Engine data point, with route, status,
 * client, chain, shard, duration and bytes, never an app_user_id, receipt content, a token or a
 * secret, and written only after the answer is on its way.
 */
import { createExecutionContext, waitOnExecutionContext } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { createApp } from "../../src/api/app.ts";
import { PATHS } from "../../src/shared/paths.ts";
import { shardOfId } from "../../src/storage/shards.ts";
import { BASE, issueClient, loginHeadersFor, uniqueId, validReceiptBody } from "../support/api.ts";
import { CountingDataset, fieldsOf } from "../support/metrics.ts";
import { SHARDS } from "../support/shards.ts";

/** Calls the app with `dataset` as METRICS; returns the answer once the invocation's work after it is done too. */
async function metered(dataset: AnalyticsEngineDataset, path: string, init: RequestInit = {}) {
  const ctx = createExecutionContext();
  const response = await createApp().fetch(new Request(BASE + path, { method: "POST", ...init }), { ...env, METRICS: dataset }, ctx);
  const body = await response.text();
  await waitOnExecutionContext(ctx);
  return { status: response.status, body };
}

describe("docs/operations.md a data point per API request", () => {
  it("login, add, delete, a refusal, an unknown path and a wrong method: one point each", async () => {
    const metrics = new CountingDataset();
    const client = await issueClient();
    const appUserId = uniqueId("au-private");
    const mark = `zq${crypto.randomUUID().slice(0, 8)}`;

    const login = await metered(metrics, PATHS.login, { headers: loginHeadersFor(client) });
    expect(login.status).toBe(200);
    expect(metrics.points).toHaveLength(1);
    const token = (JSON.parse(login.body) as { data: { access_token: string } }).data.access_token;

    const receipt = validReceiptBody();
    receipt.store_id = `${mark}-store`;
    const body = JSON.stringify(receipt);
    const headers = {
      Authorization: `Bearer ${token}`,
      client_id: client.clientId,
      chain_id: client.chains[0]!,
      app_user_id: appUserId,
      "Content-Type": "application/json",
      "Content-Length": String(body.length),
    };
    const added = await metered(metrics, PATHS.add, { headers, body });
    expect(added.status, added.body).toBe(200);
    const receiptId = (JSON.parse(added.body) as { data: { receipt_id: string } }).data.receipt_id;

    const refused = await metered(metrics, PATHS.add, { headers: { ...headers, chain_id: "not-this-clients" }, body });
    expect(refused.status).toBe(403);
    const deleted = await metered(metrics, PATHS.delete, {
      headers: { Authorization: `Bearer ${token}`, client_id: client.clientId, chain_id: client.chains[0]!, app_user_id: appUserId, receipt_id: receiptId },
    });
    expect(deleted.status, deleted.body).toBe(200);
    expect((await metered(metrics, `/receipts/v2/${appUserId}`)).status).toBe(404);
    expect((await metered(metrics, PATHS.add, { method: "PUT" })).status).toBe(405);
    // A job's path is named by its pattern: the point names no job.
    const jobId = crypto.randomUUID();
    expect((await metered(metrics, PATHS.job.replace(":job_id", jobId), { method: "GET" })).status).toBe(400);

    expect(metrics.points).toHaveLength(7);
    const fields = metrics.points.map(fieldsOf);
    const shard = shardOfId(SHARDS, receiptId)!.name;
    expect(fields[0]).toMatchObject({ kind: "request", route: PATHS.login, outcome: "ok", status: 200, clientId: client.clientId, method: "POST" });
    expect(fields[1]).toMatchObject({ route: PATHS.add, outcome: "ok", status: 200, clientId: client.clientId, chainId: client.chains[0], shard, bytes: body.length, delayMs: 0 });
    expect(fields[2]).toMatchObject({ route: PATHS.add, outcome: "refused", status: 403, chainId: "not-this-clients", shard: "" });
    expect(fields[3]).toMatchObject({ route: PATHS.delete, outcome: "ok", status: 200, shard });
    expect(fields[4]).toMatchObject({ route: "other", outcome: "refused", status: 404, clientId: "" });
    expect(fields[5]).toMatchObject({ route: PATHS.add, method: "PUT", status: 405 });
    expect(fields[6]).toMatchObject({ route: PATHS.job, method: "GET", status: 400 });
    for (const point of fields) expect(point.durationMs).toBeGreaterThanOrEqual(0);

    // Nothing of the app user, the receipt, the token or the secret.
    const written = JSON.stringify(metrics.points);
    for (const secret of [appUserId, receiptId, mark, token, client.secret, jobId]) expect(written).not.toContain(secret);
  });

  it("the answer does not wait for the write: a write that never finishes still lets it through", async () => {
    let writes = 0;
    const hanging = { writeDataPoint: () => { writes += 1; return new Promise<never>(() => {}) as unknown as void; } };
    const client = await issueClient();
    const login = await metered(hanging, PATHS.login, { headers: loginHeadersFor(client) });
    expect(login.status).toBe(200);
    expect(writes).toBe(1);
  });

  it("a dataset that throws costs the request nothing", async () => {
    const broken = { writeDataPoint: () => { throw new Error("dataset down"); } };
    const client = await issueClient();
    const login = await metered(broken, PATHS.login, { headers: loginHeadersFor(client) });
    expect(login.status).toBe(200);
  });
});
