/** docs/api.md#local-use: what npm start leaves out of wrangler dev's output, and what it keeps. */
import { describe, expect, it } from "vitest";
import { devOutputFilter, isRoutineLine, migrationSummary, untilServing, withTypesAdvice, withWorkerName } from "../../../scripts/lib/dev-output.ts";

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

  it("names the API Worker where wrangler dev prefixes its lines with [undefined], coloured or not, and leaves the rest", () => {
    const line = '[undefined] {"time":"2026-11-23T11:00:00.000Z","level":"info","event":"login","outcome":"ok"}';
    expect(withWorkerName(line, "receipts-v2-api")).toBe(line.replace("[undefined]", "[receipts-v2-api]"));
    expect(withWorkerName("\x1b[34m[undefined]\x1b[39m hello", "receipts-v2-api")).toBe("\x1b[34m[receipts-v2-api]\x1b[39m hello");
    for (const kept of ["[receipts-v2-notifier] a notice", "[wrangler:info] Ready on http://127.0.0.1:8787", "a value [undefined] mid-line"]) {
      expect(withWorkerName(kept, "receipts-v2-api")).toBe(kept);
    }
  });

  it("waits to tell a newcomer how to log in until the service answers: refused, then not ready, then serving", async () => {
    const answers: (Response | Error)[] = [new TypeError("fetch failed: ECONNREFUSED"), new Response("starting", { status: 503 }), new Response("{}", { status: 200 })];
    const asked: string[] = [];
    const fetcher = (async (url: string) => {
      asked.push(url);
      const answer = answers.shift()!;
      if (answer instanceof Error) throw answer;
      return answer;
    }) as unknown as typeof fetch;
    await untilServing("http://127.0.0.1:8787/receipts/v2/openapi.json", { fetcher, pauseMs: 1 });
    expect(asked).toHaveLength(3);
    expect(answers).toEqual([]);

    const stopped = new AbortController();
    const waiting = untilServing("http://127.0.0.1:1/", { fetcher: (async () => Promise.reject(new TypeError("refused"))) as unknown as typeof fetch, pauseMs: 1, signal: stopped.signal });
    stopped.abort();
    await expect(waiting).rejects.toThrow();
  });

  it("keeps wrangler's types warning for the API Worker, whose types it can check, and drops it for the notifier's, which it checks against the API Worker's file", () => {
    const warning = "❓ Your types might be out of date. Re-run `wrangler types` to ensure your types are correct.";
    const table = (worker: string) => [`${worker} has access to the following bindings:`, "Binding    Resource    Mode", "env.DB_S1 (receipts-v2-s1)    D1 Database    local"];
    const lines = [...table("receipts-v2-api"), warning, ...table("receipts-v2-notifier"), warning, "⎔ Starting local server..."];
    const show = devOutputFilter("receipts-v2-api");
    expect(lines.filter(show)).toEqual([...table("receipts-v2-api"), warning, ...table("receipts-v2-notifier"), "⎔ Starting local server..."]);
    expect(withTypesAdvice(warning)).toBe("❓ Your types might be out of date. Run `npm run types` to ensure your types are correct.");
    expect(withTypesAdvice("[wrangler:info] Ready on http://127.0.0.1:8787")).toBe("[wrangler:info] Ready on http://127.0.0.1:8787");
  });
});
