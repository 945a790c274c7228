/** GET /receipts/v2/status: the service's health for an operator's monitor (docs/api.md#status). */
import { statusThresholds } from "../../shared/config.ts";
import { shardsOf } from "../../storage/shards.ts";
import type { RouteContext } from "../middleware.ts";
import { jsonResponse } from "../responses.ts";
import { healthReport } from "../status/health.ts";

/**
 * The status as `npm run status --json` prints it, in `data`: 200 when healthy; 503 when a
 * threshold is passed, its message naming each reason, so that a monitor that reads only the
 * status code alerts. Checks run headers, token and client first, as for the event feed.
 */
export async function status(c: RouteContext<"status">): Promise<Response> {
  const config = c.get("config");
  const report = await healthReport(
    { shards: shardsOf(c.env), shardStates: c.env.SHARD_STATES, clients: c.env.CLIENTS, archive: c.env.ARCHIVE, config, thresholds: statusThresholds(c.env) },
    c.get("isolate").health,
  );
  if (report.healthy) return jsonResponse({ data: report, status: "OK", status_code: 200 }, 200);
  const reasons = report.reasons.map((reason) => reason.code);
  return jsonResponse(
    {
      data: report,
      message: `Unhealthy: ${[...new Set(reasons)].join(", ")}. See data.reasons and ${config.docsUrl}.`,
      status: "Service Unavailable",
      status_code: 503,
    },
    503,
  );
}
