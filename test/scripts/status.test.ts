/**
 * `npm run status` (docs/operations.md "Status") as an operator runs it: with --remote it logs
 * in as the ops client, reads GET /receipts/v2/status, prints one screen, and exits 0 while
 * healthy and 1 naming each reason when not; the deployment here is a stand-in that answers login
 * and the status in the endpoint's shape (test/api/routes/status.test.ts tests the endpoint
 * itself). Locally it reads a local state, as the other local commands do, with no ops client.
 */
import { createServer, type Server } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { freePort } from "../../harness/ports.ts";
import type { HealthReport } from "../../src/shared/health-report.ts";
import { closeLocalStates } from "../../scripts/lib/local-state.ts";
import { statusText, withErasures, type StatusAnswer } from "../../scripts/lib/status.ts";
import { localD1, migrateLocalShards } from "../support/local-d1.ts";
import { freshState, runScriptAsync, type ScriptResult } from "../support/run-script.ts";

/** Runs `scripts/status.ts` without blocking this process: the stand-in service answers from it. */
const runStatus = (args: string[], env: Record<string, string | undefined>): Promise<ScriptResult> => runScriptAsync("status", args, env);

const HEALTHY: HealthReport = {
  healthy: true,
  reasons: [],
  checked_at: "2026-11-25T12:00:00.000Z",
  shards: [
    {
      name: "s1", state: "open", full_at: null, bytes: 4_500_000_000, fill: 0.5, latest_migration: "0020_erasure_requests.sql",
      migrations_lagging: false, undelivered: 2, oldest_undelivered_at: "2026-11-25T11:59:58.000Z", failed_notices: 0,
      oldest_receipt_at: "2026-10-11T00:00:00.000Z", archive_behind_hours: 0, last_archive_started_at: "2026-11-25T03:00:00.000Z",
      last_archive_finished_at: "2026-11-25T03:02:00.000Z", read_at: "2026-11-25T12:00:00.000Z",
    },
  ],
  delivery: { undelivered: 2, oldest_undelivered_at: "2026-11-25T11:59:58.000Z", oldest_undelivered_age_seconds: 2, failed_notices: 0, endpoint: { down: false, down_since: null, up_since: null } },
  clients: { active: 12, disabled: 1 },
  thresholds: { delivery_late_seconds: 900, failed_notices: 1, endpoint_down_seconds: 3600, fill_share: 0.8, archive_behind_hours: 36, expected_migration: "0020_erasure_requests.sql" },
};
const UNHEALTHY: HealthReport = {
  ...HEALTHY,
  healthy: false,
  reasons: [{ code: "endpoint_down", message: "The app push service is marked down since 2026-11-25T10:00:00.000Z." }],
  delivery: { ...HEALTHY.delivery, endpoint: { down: true, down_since: "2026-11-25T10:00:00.000Z", up_since: null } },
};

let report: HealthReport = HEALTHY;
let port: number;
let server: Server;
const seen: Record<string, string | undefined>[] = [];

beforeAll(async () => {
  port = await freePort();
  server = createServer((request, response) => {
    seen.push({ path: request.url, scope: request.headers.scope as string | undefined, authorization: request.headers.authorization, client_id: request.headers.client_id as string });
    response.setHeader("content-type", "application/json; charset=utf-8");
    if (request.url === "/receipts/v2/login") {
      const ok = request.headers.client_secret === "ops-secret";
      response.statusCode = ok ? 200 : 403;
      response.end(JSON.stringify(ok ? { data: { access_token: "tok", expires_in: 3600, token_type: "Bearer" }, status: "OK", status_code: 200 } : { message: "no", status: "Not Acceptable", status_code: 403 }));
    } else if (request.url === "/receipts/v2/status") {
      response.statusCode = report.healthy ? 200 : 503;
      response.end(JSON.stringify(report.healthy ? { data: report, status: "OK", status_code: 200 } : { data: report, message: "Unhealthy: endpoint_down.", status: "Service Unavailable", status_code: 503 }));
    } else {
      response.statusCode = 404;
      response.end("{}");
    }
  });
  await new Promise<void>((resolve) => server.listen(port, "127.0.0.1", resolve));
});
afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

// The deployment is the stand-in; its erasures, which wrangler would list, are said not read.
const deployment = () => ({ RECEIPTS_BASE_URL: `http://127.0.0.1:${port}`, RECEIPTS_OPS_CLIENT_ID: "ops-1", RECEIPTS_OPS_CLIENT_SECRET: "ops-secret" });
const status = (...args: string[]) => runStatus(["--remote", ...args], deployment());
const NO_OPS_CLIENT = { RECEIPTS_OPS_CLIENT_ID: undefined, RECEIPTS_OPS_CLIENT_SECRET: undefined };

describe("docs/operations.md npm run status --remote", () => {
  it("healthy: one screen, exit 0; it logged in with scope service.ops and called with the token", async () => {
    report = HEALTHY;
    const result = await status();
    expect(result.status, result.stderr).toBe(0);
    expect(result.stdout).toMatch(/^HEALTHY \(2026-11-25T12:00:00.000Z\)/);
    expect(result.stdout).toContain("s1     open   50 %");
    expect(result.stdout).toContain("Delivery: 2 undelivered");
    expect(result.stdout).toContain("push service up");
    expect(result.stdout).toContain("Clients: 12 active, 1 disabled.");
    expect(seen.find((call) => call.path === "/receipts/v2/login")).toMatchObject({ scope: "service.ops", client_id: "ops-1" });
    expect(seen.find((call) => call.path === "/receipts/v2/status")).toMatchObject({ authorization: "Bearer tok", client_id: "ops-1" });
  });

  it("unhealthy: the reasons on screen and on standard error, exit 1; --json prints the endpoint's JSON", async () => {
    report = UNHEALTHY;
    // Both read the same report, at once.
    const [result, json] = await Promise.all([status(), status("--json")]);
    expect(result.status).toBe(1);
    expect(result.stdout).toContain("UNHEALTHY");
    expect(result.stdout).toContain("endpoint_down: The app push service is marked down");
    expect(result.stdout).toContain("push service DOWN since 2026-11-25T10:00:00.000Z");
    expect(result.stderr).toContain("endpoint_down");
    expect(json.status).toBe(1);
    const printed = JSON.parse(json.stdout) as StatusAnswer;
    expect(printed).toMatchObject({ status: "Service Unavailable", status_code: 503, data: { healthy: false, reasons: UNHEALTHY.reasons } });
    report = HEALTHY;
    expect((await status()).status).toBe(0);
  });

  it("without the ops client's credentials, or refused at login: exit 1 saying what to set; bad flags: exit 2", async () => {
    // Independent runs, at once.
    const [bare, refused, withPort, extra] = await Promise.all([
      runStatus(["--remote"], { ...deployment(), ...NO_OPS_CLIENT }),
      runStatus(["--remote"], { ...deployment(), RECEIPTS_OPS_CLIENT_SECRET: "wrong" }),
      status("--port", String(port)),
      status("extra"),
    ]);
    expect(bare.status).toBe(1);
    expect(bare.stderr).toContain("RECEIPTS_OPS_CLIENT_ID and RECEIPTS_OPS_CLIENT_SECRET");
    expect(bare.stdout).toBe("");
    expect(refused.status).toBe(1);
    expect(refused.stderr).toContain("Login as ops-1 failed (403)");
    expect(withPort.status).toBe(2);
    expect(extra.status).toBe(2);
  });

  it("a failed erasure is a reason of its own; erasures that could not be read are said so", () => {
    const healthy: StatusAnswer = { data: HEALTHY, status: "OK", status_code: 200 };
    const failed = withErasures(healthy, { running: 1, failed: ["5b1e-erasure"] });
    expect(failed).toMatchObject({ status_code: 503, data: { healthy: false, reasons: [{ code: "erasure_failed" }] } });
    expect(statusText(failed)).toContain("Erasures: 1 running, 1 failed (5b1e-erasure).");
    expect(withErasures(healthy, { running: 0, failed: [] }).data.healthy).toBe(true);
    expect(statusText(withErasures(healthy, { error: "npm start is not running" }))).toContain("Erasures: not read (npm start is not running).");
  });
});

describe("docs/operations.md npm run status locally reads the local state, as the other local commands do", () => {
  const state = freshState();
  migrateLocalShards(state);
  afterAll(closeLocalStates);

  it("without an ops client or a running service: one screen of the local state's health, exit 0; the erasures said not read", async () => {
    const result = await runStatus(["--persist-to", state, "--json"], NO_OPS_CLIENT);
    expect(result.status, result.stderr).toBe(0);
    const printed = JSON.parse(result.stdout) as StatusAnswer;
    expect(printed).toMatchObject({ status: "OK", status_code: 200, data: { healthy: true, reasons: [], clients: { active: 0, disabled: 0 } } });
    expect(printed.data.shards.map(({ name, state: shardState, migrations_lagging }) => [name, shardState, migrations_lagging])).toEqual([
      ["s1", "open", false],
      ["s2", "open", false],
    ]);
    expect(printed.data.jobs?.erasures).toEqual({ error: expect.stringContaining("Nothing answers at http://localhost:") });
  }, 120_000);

  it("a failed notice in the local state is a reason: exit 1 naming it, on screen and on standard error", async () => {
    await localD1(
      state,
      "s2",
      `INSERT INTO failed_notices (event_id, receipt_id, payload, created_at, failed_at, attempts, last_error)
       VALUES ('e-status-1', 'r-status-1', '{}', '2026-11-25T12:00:00.000Z', '2026-11-25T12:00:00.000Z', 11, 'HTTP 410')`,
    );
    await closeLocalStates();
    const result = await runStatus(["--persist-to", state], NO_OPS_CLIENT);
    expect(result.status).toBe(1);
    expect(result.stdout).toMatch(/^UNHEALTHY/);
    expect(result.stdout).toContain("failed_notices: 1 failed notice(s) wait for a replay");
    expect(result.stderr).toContain("Unhealthy: failed_notices.");
  }, 120_000);
});
