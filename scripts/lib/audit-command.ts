/**
 * The command of `npm run audit` (docs/api.md#audit): the records of one receipt, client or chain
 * on every shard, newest first, with the queries of src/storage/audit.ts.
 */
import { shardOfId } from "../../src/shared/shard-ids.ts";
import { AUDIT_SUBJECTS, auditPage, type AuditCursor, type AuditRecord, type AuditSubject } from "../../src/storage/audit.ts";
import type { Statement } from "../../src/storage/statement.ts";
import { UsageError, parse, table, usableId } from "./cli.ts";
import { targetShards, type ConfigShard } from "./shards.ts";
import { TARGET_OPTIONS, targetOf, type Target } from "./wrangler.ts";

export const AUDIT_USAGE = `Usage: npm run audit -- receipt <receipt_id> | client <client_id> | chain <chain_id>
                      [--since <RFC 3339 date>] [--json] [--remote]

  Prints the audit records (deletes and erasures) of one receipt, POS client or chain on
  every shard, newest first, as a header row and aligned columns: at, action, receipt_id,
  chain_id, client_id, app_user, request_id ('-' for none). With --json one JSON array of
  objects with those fields. --since keeps the records at or after a date (2026-11-01) or a
  time (2026-11-01T09:30:00Z, or with an offset). Erasures are recorded with client_id
  'operator': 'client operator' lists them.

Acts on the local state of 'npm start' unless --remote is given (--persist-to <dir> picks
another local state directory).`;

/** Records per query: one batch reads this many of a shard's records. */
const PAGE = 1000;

// RFC 3339: a full-date, or a date-time with its offset (Z or ±hh:mm).
const RFC3339 =
  /^(\d{4})-(\d{2})-(\d{2})(?:[Tt ](?:[01]\d|2[0-3]):[0-5]\d:(?:[0-5]\d|60)(?:\.\d+)?(?:[Zz]|[+-](?:[01]\d|2[0-3]):[0-5]\d))?$/;

/**
 * The command: reads the records with `run`, which runs statements on a shard (the script's is
 * `execute` of scripts/lib/d1.ts; the tests run most cases in-process on the same local databases).
 */
export function auditCommand(run: RunOnShard): (argv: string[]) => Promise<void> {
  return async (argv) => {
    const [subject, ...rest] = argv;
    if (subject === undefined) throw new UsageError("No receipt, client or chain given.");
    if (!Object.hasOwn(AUDIT_SUBJECTS, subject)) throw new UsageError(`Unknown command: ${subject}`);
    const { values, positionals } = parse(rest, {
      since: { type: "string" },
      json: { type: "boolean" },
      ...TARGET_OPTIONS,
    });
    if (positionals.length === 0) throw new UsageError(`No ${subject} ID given.`);
    if (positionals.length > 1) throw new UsageError(`Unexpected argument: ${positionals[1]}`);
    const id = usableId(`${subject} ID`, positionals[0]!, { optionLike: true });
    const since = values.since === undefined ? undefined : rfc3339(values.since);
    const records = await auditRecords(run, targetOf(values), subject as AuditSubject, id, since);
    if (values.json) console.log(JSON.stringify(records));
    else if (records.length === 0) console.log(`No audit records for ${subject} ${JSON.stringify(id)}.`);
    else {
      const rows = records.map((record) => [record.at, record.action, record.receipt_id ?? "-", record.chain_id ?? "-", record.client_id, record.app_user, record.request_id]);
      console.log(table(["AT", "ACTION", "RECEIPT_ID", "CHAIN_ID", "CLIENT_ID", "APP_USER", "REQUEST_ID"], rows));
    }
  };
}

/** Runs statements on one shard of a target as one batch and returns each statement's rows. */
export type RunOnShard = (target: Target, shard: ConfigShard, statements: readonly Statement[]) => Promise<unknown[][]>;

/**
 * Every record of the subject, newest first. A receipt's records are on the shard its ID names
 * (none for an ID that names no shard); a client's or chain's on any shard.
 */
async function auditRecords(run: RunOnShard, target: Target, subject: AuditSubject, id: string, since: string | undefined): Promise<AuditRecord[]> {
  const all = targetShards(target);
  const shards = subject === "receipt" ? [shardOfId(all, id) ?? []].flat() : all;
  const records: AuditRecord[] = [];
  for (const shard of shards) records.push(...(await shardRecords(run, target, shard, subject, id, since)));
  // Each shard's records come newest first; ISO times of one format sort as time does.
  return records.sort((a, b) => b.at.localeCompare(a.at));
}

async function shardRecords(
  run: RunOnShard,
  target: Target,
  shard: ConfigShard,
  subject: AuditSubject,
  id: string,
  since: string | undefined,
): Promise<AuditRecord[]> {
  const records: AuditRecord[] = [];
  let after: AuditCursor | undefined;
  for (;;) {
    const rows = ((await run(target, shard, [auditPage(subject, id, { since, after, limit: PAGE })])).at(-1) ?? []) as (AuditRecord & AuditCursor)[];
    for (const { audit_id: _id, ...record } of rows) records.push(record);
    if (rows.length < PAGE) return records;
    after = rows.at(-1)!;
  }
}

/** A --since value as the ISO time the records hold (a date alone is its midnight UTC). */
function rfc3339(value: string): string {
  const match = RFC3339.exec(value);
  const [year, month, day] = (match?.slice(1, 4) ?? []).map(Number);
  // Date.parse would roll 2026-02-31 over into March rather than refuse it.
  const dayExists = match !== null && new Date(Date.UTC(year!, month! - 1, day!)).getUTCDate() === day && month! <= 12;
  const time = dayExists ? Date.parse(value.length === 10 ? `${value}T00:00:00Z` : withoutLeapSecond(value)) : Number.NaN;
  if (Number.isNaN(time)) throw new UsageError(`--since is not an RFC 3339 date or time: ${JSON.stringify(value)}`);
  return new Date(time).toISOString();
}

/**
 * RFC 3339 allows a leap second (…:60), which Date.parse refuses. The records' times, written by
 * JavaScript, never fall inside one, so "at or after a leap second" means from the next second on.
 */
function withoutLeapSecond(value: string): string {
  const leap = /^(.{17})60(?:\.\d+)?(.*)$/.exec(value);
  if (!leap) return value;
  return new Date(Date.parse(`${leap[1]}59${leap[2]}`) + 1000).toISOString();
}
