/**
 * Operators see the service's health on one screen (docs/operations.md "Status"): what
 * `GET /receipts/v2/status` answers a monitor, and the erasures. Exit 0 when healthy, 1 naming
 * each threshold passed, so that a cron job or CI can alert on it.
 */
import { UsageError, parse, runCli } from "./lib/cli.ts";
import { JOB_TARGET_OPTIONS, jobTargetOf, listJobs } from "./lib/jobs.ts";
import { fetchStatus, localStatus, statusText, withErasures, type ErasureJobs, type StatusAnswer } from "./lib/status.ts";
import { targetOf } from "./lib/wrangler.ts";

const USAGE = `Usage: npm run status -- [--json] [--remote | --port <port> | --persist-to <dir>]

  The service's health: per shard its state, fill against SHARD_FILL_BYTES, migrations,
  undelivered events and failed notices, how far behind the archive's cutoff; delivery (the
  oldest undelivered event's age, the push service up or down); running and failed
  erasures; active and disabled clients. Exit 0 when healthy; 1 when a threshold is passed,
  each named (docs/operations.md "Status" and "Alerts").

  Locally it reads the local state of 'npm start' (--persist-to <dir> another), as the other
  commands do, with the settings of wrangler.jsonc and .dev.vars; the erasures are read from
  'npm start' (--port, else the port it recorded, else 8787), and said not read when it is not
  running. With --remote it logs in as an ops client (npm run clients -- issue --ops --remote)
  whose RECEIPTS_OPS_CLIENT_ID and RECEIPTS_OPS_CLIENT_SECRET are in the environment, and reads
  GET /receipts/v2/status of RECEIPTS_BASE_URL.

  --json     the endpoint's JSON, with data.jobs.erasures added`;

await runCli(USAGE, async (argv) => {
  const { values, positionals } = parse(argv, { json: { type: "boolean" }, ...JOB_TARGET_OPTIONS });
  if (positionals.length > 0) throw new UsageError(`Unexpected argument: ${positionals[0]}`);
  const answer = values.remote ? await remoteStatus(values) : await localStatus(targetOf(values));
  const full = withErasures(answer, await erasures(values));
  if (values.json) console.log(JSON.stringify(full));
  else console.log(statusText(full));
  if (!full.data.healthy) throw new Error(full.message ?? "Unhealthy.");
});

// The deployment's status, as its monitor reads it.
async function remoteStatus(values: Parameters<typeof jobTargetOf>[0]): Promise<StatusAnswer> {
  // Refuses --port and --persist-to beside --remote.
  await jobTargetOf(values);
  const baseUrl = process.env.RECEIPTS_BASE_URL;
  if (!baseUrl) throw new Error("Set RECEIPTS_BASE_URL to the deployment's address (https://receipts.example.com).");
  const { RECEIPTS_OPS_CLIENT_ID: clientId, RECEIPTS_OPS_CLIENT_SECRET: secret } = process.env;
  if (!clientId || !secret) {
    throw new Error("Set RECEIPTS_OPS_CLIENT_ID and RECEIPTS_OPS_CLIENT_SECRET to an ops client's (npm run clients -- issue --ops --remote).");
  }
  try {
    return await fetchStatus(baseUrl, clientId, secret);
  } catch (error) {
    throw new Error(`No status from ${baseUrl}: ${(error as Error).message}`);
  }
}

async function erasures(values: Parameters<typeof jobTargetOf>[0]): Promise<ErasureJobs> {
  try {
    const jobs = await listJobs("erasure", await jobTargetOf(values));
    return {
      running: jobs.filter((job) => ["queued", "running", "waiting", "waitingForPause", "paused"].includes(job.status)).length,
      failed: jobs.filter((job) => job.status === "errored").map((job) => job.id),
    };
  } catch (error) {
    return { error: (error as Error).message.split("\n").find((line) => line.trim() !== "" && !line.startsWith("wrangler ")) ?? "wrangler failed" };
  }
}
