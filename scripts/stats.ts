/**
 * Operators read the service's metrics (docs/operations.md "Metrics"): requests, error rate and
 * latency per client, chain or route over a recent period, from the data points both Workers write
 * to Workers Analytics Engine (src/shared/metrics.ts), through its SQL API.
 */
import { UsageError, parse, runCli, table } from "./lib/cli.ts";
import { STATS_GROUPS, STATS_HEADER, querySqlApi, sinceArgument, sqlSafeId, statsRows, statsSql, statsTableRows, type StatsGroup } from "./lib/stats.ts";

const USAGE = `Usage: npm run stats -- [--since <1h>] [--by client|chain|route] [--client <id>] [--chain <id>] [--json] --remote

  Per kind (request, push) and group over the last --since (30m, 1h, 7d; default 1h, at
  most 92d): the data points' count, the error rate (a request refused or failed, a push
  to retry or refused), the 5xx rate of requests, and the median and 99th percentile of
  the duration in ms, weighted by Analytics Engine's sample interval.

  --by        client (default), chain, or route (a request's path, a push's event type)
  --client    only this client_id; --chain only this chain_id
  --json      one JSON array of {"kind","group","count","errors","failed","p50_ms","p99_ms"}
  --remote    required: reads the deployment's dataset through the Analytics Engine SQL API,
              with CLOUDFLARE_ACCOUNT_ID and CLOUDFLARE_API_TOKEN (Account Analytics: Read)
              from the environment. Under 'npm start' the data points are taken and kept
              nowhere, so there is nothing local to read.`;

await runCli(USAGE, async (argv) => {
  const { values, positionals } = parse(argv, {
    since: { type: "string" },
    by: { type: "string" },
    client: { type: "string" },
    chain: { type: "string" },
    json: { type: "boolean" },
    remote: { type: "boolean" },
  });
  if (positionals.length > 0) throw new UsageError(`Unexpected argument: ${positionals[0]}`);
  const by = values.by ?? "client";
  if (!Object.hasOwn(STATS_GROUPS, by)) throw new UsageError(`--by is client, chain or route, not ${JSON.stringify(by)}.`);
  const sql = statsSql({
    since: sinceArgument(values.since ?? "1h"),
    by: by as StatsGroup,
    clientId: values.client === undefined ? undefined : sqlSafeId("--client", values.client),
    chainId: values.chain === undefined ? undefined : sqlSafeId("--chain", values.chain),
  });
  if (!values.remote) {
    throw new UsageError(
      "stats reads the deployment's Analytics Engine dataset: give --remote. Locally ('npm start') the METRICS binding takes data points and keeps none.",
    );
  }
  const accountId = process.env.CLOUDFLARE_ACCOUNT_ID;
  const token = process.env.CLOUDFLARE_API_TOKEN;
  if (!accountId || !token) throw new Error("Set CLOUDFLARE_ACCOUNT_ID and CLOUDFLARE_API_TOKEN (a token with Account Analytics: Read) in the environment.");
  const rows = statsRows(await querySqlApi(sql, accountId, token));
  if (values.json) console.log(JSON.stringify(rows));
  else if (rows.length === 0) console.log("No data points in that period.");
  else console.log(table(STATS_HEADER, statsTableRows(rows)));
});
