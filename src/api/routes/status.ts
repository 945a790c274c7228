/** GET /receipts/v2/status: the service's health for an operator's monitor (docs/api.md#status). */
import { statusThresholds } from "../../shared/config.ts";
import { statusBody } from "../../shared/health-report.ts";
import { shardsOf } from "../../storage/shards.ts";
import type { RouteContext } from "../context.ts";
import { jsonResponse } from "../responses.ts";
import { healthReport } from "../status/health.ts";

/**
 * The status as `npm run status -- --json` prints it, in `data`: 200 when healthy, 503 when a
 * threshold is passed (`statusBody`). Checks run headers, token and client first, as for the
 * event feed.
 */
export async function status(c: RouteContext<"status">): Promise<Response> {
  const config = c.get("config");
  const report = await healthReport(
    { shards: shardsOf(c.env), shardStates: c.env.SHARD_STATES, clients: c.env.CLIENTS, archive: c.env.ARCHIVE, config, thresholds: statusThresholds(c.env) },
    c.get("isolate").health,
  );
  const body = statusBody(report, config.docsUrl);
  return jsonResponse(body, body.status_code);
}
