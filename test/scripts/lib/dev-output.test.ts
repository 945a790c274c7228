/** docs/api.md#local-use: what npm start leaves out of wrangler dev's output, and what it keeps. */
import { describe, expect, it } from "vitest";
import { devOutputFilter, isRoutineLine, migrationSummary } from "../../../scripts/lib/dev-output.ts";

describe("docs/api.md#local-use npm start's terminal", () => {
  it.each([
    ["the cron trigger's own request", "[wrangler:info] GET /cdn-cgi/handler/scheduled?cron=*+*+*+*+* 200 OK (14ms)"],
    ["the delivery of a sweep message to the API Worker", "[wrangler:info] QUEUE receipts-v2-sweeps 1/1 (185ms)"],
    ["a job that found nothing to do", '{"time":"2026-11-23T11:00:00.000Z","level":"info","event":"scheduled","job":"notices.resend","shard":"s1","sent":0}'],
  ])("drops %s", (_label, line) => expect(isRoutineLine(line)).toBe(true));

  it.each([
    ["a request", "[wrangler:info] POST /receipts/v2/add 200 OK (31ms)"],
    ["a batch of notices", "[wrangler:info] QUEUE receipts-v2-notices 1/1 (40ms)"],
    ["a delivered event", '{"time":"2026-11-23T11:00:00.000Z","level":"info","event":"notice","outcome":"delivered","attempts":1}'],
    ["a job that did something", '{"time":"2026-11-23T11:00:00.000Z","level":"info","event":"scheduled","job":"notices.resend","shard":"s1","sent":3}'],
    ["a failed job", '{"time":"2026-11-23T11:00:00.000Z","level":"error","event":"scheduled","job":"audit.purge-expired","shard":"s2","cause":"D1_ERROR"}'],
    ["where it serves", "[wrangler:info] Ready on http://127.0.0.1:8787"],
    ["a warning", "▲ [WARNING] Unable to fetch Request.cf"],
    ["a line that only looks like JSON", "{not json"],
  ])("keeps %s", (_label, line) => expect(isRoutineLine(line)).toBe(false));

  it("shows each Worker's bindings table once, though wrangler prints it again once the server is up", () => {
    const table = (worker: string) => [`${worker} has access to the following bindings:`, "Binding    Resource    Mode", "env.DB_S1 (receipts-v2-s1)    D1 Database    local"];
    const lines = [...table("receipts-v2-api"), "", ...table("receipts-v2-notifier"), "⎔ Starting local server...", ...table("receipts-v2-api"), "[wrangler:info] Ready on http://127.0.0.1:8787"];
    const show = devOutputFilter();
    expect(lines.filter(show)).toEqual([...table("receipts-v2-api"), "", ...table("receipts-v2-notifier"), "⎔ Starting local server...", "[wrangler:info] Ready on http://127.0.0.1:8787"]);
  });

  it("sums up the migrations of a shard in one line", () => {
    const table = "Migrations to be applied:\n┌──────────────┐\n│ name │\n├──────────────┤\n│ 0001_receipts.sql │\n│ 0002_outbox.sql │\n└──────────────┘\n" +
      "┌──────────────┬────────┐\n│ 0001_receipts.sql │ ✅ │\n│ 0002_outbox.sql │ ✅ │\n└──────────────┴────────┘\n";
    expect(migrationSummary("s1", table)).toBe("Shard s1: applied 2 migrations (0001_receipts.sql, 0002_outbox.sql).");
    expect(migrationSummary("s2", "✅ No migrations to apply!")).toBe("Shard s2: migrations up to date.");
  });
});
