/**
 * Operators list the deletion notices that could not be delivered and send them again
 * (docs/api.md#deletion-notices, #operators). Both act on the D1 database through `wrangler d1 execute`, with the SQL of
 * src/storage/outbox-sql.ts, which the Workers use too.
 */
import { EVENT_ID_PATTERN, FAILED_SQL, replayFailedSql } from "../src/storage/outbox-sql.ts";
import { UsageError, parse, runCli } from "./lib/cli.ts";
import { targetFlags, targetOf, wrangler, type Target } from "./lib/wrangler.ts";

const USAGE = `Usage: npm run notices -- <command> [options]

  failed [--json]          notices that could not be delivered, oldest failure first:
                           event_id, receipt_id, failed_at, attempts, last_error
  replay [<event_id>...]   send failed notices again; every one when no event_id is given.
                           Each goes back to the outbox, and the API Worker's cron job sends
                           it within a minute (under 'npm start' too).

Every command acts on the local state of 'npm start' unless --remote is given
(--persist-to <dir> picks another local state directory).`;

const COMMON = {
  remote: { type: "boolean" },
  "persist-to": { type: "string" },
} as const;

/** A row of `FAILED_SQL.list`. */
interface FailedNotice {
  event_id: string;
  receipt_id: string;
  failed_at: string;
  attempts: number;
  last_error: string;
}

await runCli(USAGE, (argv) => {
  const [command, ...rest] = argv;
  switch (command) {
    case "failed":
      return failed(rest);
    case "replay":
      return replay(rest);
    default:
      throw new UsageError(command ? `Unknown command: ${command}` : "No command given.");
  }
});

function failed(argv: string[]): void {
  const { values, positionals } = parse(argv, { ...COMMON, json: { type: "boolean" } });
  if (positionals.length > 0) throw new UsageError(`Unexpected argument: ${positionals[0]}`);
  const notices = execute<FailedNotice>(targetOf(values), FAILED_SQL.list).at(-1) ?? [];
  if (values.json) console.log(JSON.stringify(notices));
  else if (notices.length === 0) console.log("No failed notices.");
  else {
    for (const notice of notices) {
      console.log(`${notice.event_id}\treceipt=${notice.receipt_id}\tfailed=${notice.failed_at}\tattempts=${notice.attempts}\t${notice.last_error}`);
    }
  }
}

function replay(argv: string[]): void {
  const { values, positionals } = parse(argv, COMMON);
  const bad = positionals.find((id) => !EVENT_ID_PATTERN.test(id));
  if (bad !== undefined) throw new UsageError(`Not an event_id: ${JSON.stringify(bad)} (a UUIDv7 as 'failed' lists them).`);
  const wanted = [...new Set(positionals)];
  // The last statement of the batch returns the notices it moved.
  const moved = execute<{ event_id: string; receipt_id: string }>(targetOf(values), replayFailedSql(wanted)).at(-1) ?? [];
  if (moved.length === 0 && wanted.length === 0) console.log("No failed notices to replay.");
  else if (moved.length > 0) {
    console.log(`Replaying ${moved.length} notice${moved.length === 1 ? "" : "s"}; the cron job sends them within a minute:`);
    for (const { event_id, receipt_id } of moved) console.log(`  ${event_id}\treceipt=${receipt_id}`);
  }
  const missing = wanted.filter((id) => !moved.some((notice) => notice.event_id === id));
  if (missing.length > 0) throw new Error(`No failed notice ${missing.join(", ")}; see 'npm run notices -- failed'.`);
}

/**
 * Runs SQL through `wrangler d1 execute`, which runs all its statements as one batch, and returns
 * each statement's rows.
 */
function execute<Row>(target: Target, sql: string): Row[][] {
  const output = wrangler(["d1", "execute", "DB", "--json", "--command", sql, ...targetFlags(target)]);
  return (JSON.parse(output) as { results: Row[] }[]).map(({ results }) => results);
}
