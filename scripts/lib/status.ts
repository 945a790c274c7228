/**
 * `npm run status` (docs/operations.md "Status"): with --remote asks the deployment for its
 * health, as a monitor does (`GET /receipts/v2/status`, an ops client's token); locally puts it
 * together in this process from the local state, as the other local commands read it, with the
 * endpoint's own code (src/api/status/assemble.ts). Adds what only an operator's machine can
 * read (the erasures, Workflow instances that a Worker cannot list), and prints it.
 */
import path from "node:path";
import { assembleHealth, firstLayoutShards } from "../../src/api/status/assemble.ts";
import { readShardHealth } from "../../src/storage/health.ts";
import { healthConfig, statusThresholds, type ApiSettings } from "../../src/shared/config.ts";
import { statusBody, type HealthReport } from "../../src/shared/health-report.ts";
import { PATHS } from "../../src/shared/paths.ts";
import { OPS_SCOPE } from "../../src/shared/types.ts";
import { table } from "./cli.ts";
import { readConfigFile } from "./config.ts";
import { localClientStore } from "./client-store.ts";
import { readDevVars } from "./dev-vars.ts";
import { localState } from "./local-state.ts";
import { localShardStates } from "./shard-states.ts";
import { localConfigPaths, readShards } from "./shards.ts";
import type { Target } from "./wrangler.ts";

/** The status as the endpoint answers it, with the erasures this script adds. */
export interface StatusAnswer {
  data: HealthReport & { jobs?: { erasures: ErasureJobs } };
  message?: string;
  status: string;
  status_code: number;
}

/** Running and failed erasures, or why they could not be read. */
export type ErasureJobs = { running: number; failed: string[] } | { error: string };

/**
 * The status of a local state (`npm start`'s, or --persist-to's), put together in this process
 * from its shards, SHARD_STATES, CLIENTS and ARCHIVE: no running service and no ops client needed.
 * The settings are the config's `vars` with `.dev.vars` over them, as `wrangler dev` reads them.
 */
export async function localStatus(target: Target, now = new Date()): Promise<StatusAnswer> {
  const { api } = localConfigPaths();
  const state = localState(target, api);
  const settings = { ...configVars(api), ...readDevVars(path.join(path.dirname(api), ".dev.vars")) } as unknown as ApiSettings;
  const shards = readShards(api);
  const [states, records, firstLayout, reads] = await Promise.all([
    localShardStates(state).read(shards),
    localClientStore(state).readAll(),
    state.r2("ARCHIVE", (bucket) => firstLayoutShards(bucket)),
    Promise.all(shards.map(async (shard) => [shard.name, await readShardHealth(async (health) => (await state.batch(shard, [health]))[0]!, now)] as const)),
  ]);
  const disabled = records.filter((record) => record.disabled).length;
  const report = assembleHealth(
    {
      shards: shards.map((shard) => shard.name),
      states,
      reads: new Map(reads),
      clients: { active: records.length - disabled, disabled },
      firstLayout,
      config: healthConfig(settings),
      thresholds: statusThresholds(settings),
    },
    now,
  );
  return statusBody(report, settings.DOCS_URL);
}

// The `vars` of a wrangler config, as strings, the form our configs use.
function configVars(config: string): Record<string, string> {
  return Object.fromEntries(Object.entries((readConfigFile(config).vars ?? {}) as Record<string, unknown>).map(([name, value]) => [name, String(value)]));
}

/** Logs in as the ops client and reads the status; throws with the service's message when it refuses. */
export async function fetchStatus(baseUrl: string, clientId: string, clientSecret: string, fetcher: typeof fetch = fetch): Promise<StatusAnswer> {
  const login = await fetcher(new URL(PATHS.login, baseUrl), {
    method: "POST",
    headers: { client_id: clientId, client_secret: clientSecret, token_type: "Bearer", scope: OPS_SCOPE },
  });
  const loginBody = (await login.json()) as { data?: { access_token: string }; message?: string };
  if (login.status !== 200 || !loginBody.data) throw new Error(`Login as ${clientId} failed (${login.status}): ${loginBody.message ?? ""}`);
  const answer = await fetcher(new URL(PATHS.status, baseUrl), {
    headers: { Authorization: `Bearer ${loginBody.data.access_token}`, client_id: clientId },
  });
  const body = (await answer.json()) as StatusAnswer;
  if ((answer.status !== 200 && answer.status !== 503) || !body.data) throw new Error(`GET ${PATHS.status} answered ${answer.status}: ${body.message ?? ""}`);
  return body;
}

/** The answer with the erasures added: a failed one is a reason, and makes it unhealthy. */
export function withErasures(answer: StatusAnswer, erasures: ErasureJobs): StatusAnswer {
  const data = { ...answer.data, jobs: { erasures } };
  if (!("failed" in erasures) || erasures.failed.length === 0) return { ...answer, data };
  const reasons: HealthReport["reasons"] = [
    ...data.reasons,
    { code: "erasure_failed", message: `Erasure job(s) ${erasures.failed.join(", ")} failed: npm run jobs -- show <id>.` },
  ];
  return {
    data: { ...data, healthy: false, reasons },
    message: `Unhealthy: ${[...new Set(reasons.map((reason) => reason.code))].join(", ")}.`,
    status: "Service Unavailable",
    status_code: 503,
  };
}

/** The status for a person: a verdict and its reasons, then the shards, delivery, jobs and clients. */
export function statusText(answer: StatusAnswer): string {
  const report = answer.data;
  const lines = [report.healthy ? `HEALTHY (${report.checked_at})` : `UNHEALTHY (${report.checked_at})`];
  for (const reason of report.reasons) lines.push(`  ${reason.code}: ${reason.message}`);
  lines.push("");
  lines.push(
    table(
      ["SHARD", "STATE", "FILL", "BYTES", "MIGRATION", "UNDELIVERED", "FAILED", "ARCHIVE_BEHIND_H", "LAST_ARCHIVE_RUN"],
      report.shards.map((shard) => [
        shard.name,
        shard.state,
        shard.fill === null ? "-" : `${Math.round(shard.fill * 100)} %`,
        String(shard.bytes ?? "-"),
        `${shard.latest_migration ?? "-"}${shard.migrations_lagging ? " (lagging)" : ""}`,
        String(shard.undelivered ?? "-"),
        String(shard.failed_notices ?? "-"),
        shard.archive_behind_hours === null ? "-" : String(shard.archive_behind_hours),
        shard.last_archive_started_at ?? "-",
      ]),
    ),
  );
  const { delivery } = report;
  lines.push("");
  lines.push(
    `Delivery: ${delivery.undelivered} undelivered${delivery.oldest_undelivered_at ? `, the oldest since ${delivery.oldest_undelivered_at} (${delivery.oldest_undelivered_age_seconds} s)` : ""}; ` +
      `${delivery.failed_notices} failed notice(s); push service ${delivery.endpoint.down ? `DOWN since ${delivery.endpoint.down_since}` : "up"}.`,
  );
  const erasures = report.jobs?.erasures;
  if (erasures) {
    lines.push(
      "error" in erasures
        ? `Erasures: not read (${erasures.error}).`
        : `Erasures: ${erasures.running} running, ${erasures.failed.length} failed${erasures.failed.length ? ` (${erasures.failed.join(", ")})` : ""}.`,
    );
  }
  lines.push(`Clients: ${report.clients.active} active, ${report.clients.disabled} disabled.`);
  return lines.join("\n");
}
