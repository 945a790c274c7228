/**
 * Operators list the events that could not be delivered and send them again
 * (docs/api.md#operators-list-and-replay). Both act on every shard's D1 database (the shards of
 * wrangler.jsonc: the local state's in-process, the deployment's through D1's query API), with the outbox's statements
 * (src/storage/outbox/statements.ts), which the Workers run too. An event_id names its shard, so
 * a replay goes straight to it.
 */
import { shardOfId } from "../src/shared/shard-ids.ts";
import { EVENT_ID_PATTERN, REPLAY_PAGE, listFailed, replayFailed } from "../src/storage/outbox/statements.ts";
import { UsageError, parse, runCommands, table } from "./lib/cli.ts";
import { execute, onEachShard } from "./lib/d1.ts";
import { targetShards, type ConfigShard } from "./lib/shards.ts";
import { TARGET_OPTIONS, targetOf } from "./lib/wrangler.ts";

const USAGE = `Usage: npm run notices -- <command> [options]

  failed [--json]          notices that could not be delivered, on every shard, oldest
                           failure first: event_id, type, shard, receipt_id, failed_at,
                           attempts, last_error
  replay [<event_id>...]   send failed notices again (at most 1,000 event_ids); with none,
                           the oldest 1,000 of every shard (run it again for more). Each goes
                           back to the outbox of the shard its event_id names, and the API
                           Worker's cron job sends it within a minute (under 'npm start' too).

Every command acts on the local state of 'npm start' unless --remote is given
(--persist-to <dir> picks another local state directory).`;

/** A row of `listFailed`, with the shard it was found on. */
interface FailedNotice {
  event_id: string;
  type: string;
  shard: string;
  receipt_id: string;
  failed_at: string;
  attempts: number;
  last_error: string;
}

await runCommands(USAGE, { failed, replay });

async function failed(argv: string[]): Promise<void> {
  const { values, positionals } = parse(argv, { ...TARGET_OPTIONS, json: { type: "boolean" } });
  if (positionals.length > 0) throw new UsageError(`Unexpected argument: ${positionals[0]}`);
  const target = targetOf(values);
  const notices: FailedNotice[] = [];
  // A shard that cannot be read (after the local state's waits) keeps none of the others from being read.
  const failures = await onEachShard(targetShards(target), async (shard) => {
    for (const row of (await execute<Omit<FailedNotice, "shard">>(target, shard, [listFailed()])).at(-1) ?? []) {
      notices.push({ event_id: row.event_id, type: row.type, shard: shard.name, receipt_id: row.receipt_id, failed_at: row.failed_at, attempts: row.attempts, last_error: row.last_error });
    }
  });
  // A list without a shard's notices would read as the whole list (`[]`: nothing to replay): a
  // command that could not read every shard prints none, and says on standard error what it read.
  if (failures.length > 0) {
    const read = `The shards that answered hold ${notices.length} failed notice${notices.length === 1 ? "" : "s"}`;
    throw new Error(`${failures.map((failure) => failure.message).join("\n")}\nNo list printed: it would miss the notices of the shard(s) above. ${read}; run the command again.`);
  }
  notices.sort((a, b) => a.failed_at.localeCompare(b.failed_at) || a.event_id.localeCompare(b.event_id));
  if (values.json) console.log(JSON.stringify(notices));
  else if (notices.length === 0) console.log("No failed notices.");
  else {
    const rows = notices.map((notice) => [notice.event_id, notice.type, notice.shard, notice.receipt_id, notice.failed_at, String(notice.attempts), notice.last_error]);
    console.log(table(["EVENT_ID", "TYPE", "SHARD", "RECEIPT_ID", "FAILED_AT", "ATTEMPTS", "LAST_ERROR"], rows));
  }
}

async function replay(argv: string[]): Promise<void> {
  const { values, positionals } = parse(argv, TARGET_OPTIONS);
  const bad = positionals.find((id) => !EVENT_ID_PATTERN.test(id));
  if (bad !== undefined) throw new UsageError(`Not an event_id: ${JSON.stringify(bad)} (a UUIDv7 as 'failed' lists them).`);
  if (positionals.length > REPLAY_PAGE) throw new UsageError(`At most ${REPLAY_PAGE} event_ids at once; without any, replay takes ${REPLAY_PAGE} a shard a run.`);
  const target = targetOf(values);
  const all = targetShards(target);
  const wanted = [...new Set(positionals)];
  // Every id is checked before anything runs: one that names no shard changes nothing.
  const byShard = new Map<ConfigShard, string[]>();
  for (const id of wanted) {
    const shard = shardOfId(all, id);
    if (!shard) throw new UsageError(`event_id ${id} names no shard of wrangler.jsonc (shards: ${all.map(({ name }) => name).join(", ")}).`);
    byShard.set(shard, [...(byShard.get(shard) ?? []), id]);
  }
  const moved: { event_id: string; receipt_id: string; shard: string }[] = [];
  // Shards that may hold more failed notices than one run replays.
  const fuller: string[] = [];
  const failures = await onEachShard(wanted.length === 0 ? all : [...byShard.keys()], async (shard) => {
    // The last statement of the batch returns the events it moved.
    const rows = (await execute<{ event_id: string; receipt_id: string }>(target, shard, replayFailed(byShard.get(shard) ?? []))).at(-1) ?? [];
    moved.push(...rows.map((row) => ({ ...row, shard: shard.name })));
    if (wanted.length === 0 && rows.length === REPLAY_PAGE) fuller.push(shard.name);
  });
  // An id on a shard that failed is reported with its shard's failure, not as missing.
  const failedShards = new Set(failures.map((failure) => failure.shard));
  const missing = [...byShard]
    .filter(([shard]) => !failedShards.has(shard.name))
    .flatMap(([, ids]) => ids)
    .filter((id) => !moved.some((notice) => notice.event_id === id));
  // What was replayed is done, and said on standard output; what was not, on standard error.
  if (moved.length === 0 && wanted.length === 0 && failures.length === 0) console.log("No failed notices to replay.");
  else if (moved.length > 0) {
    console.log(`Replaying ${moved.length} notice${moved.length === 1 ? "" : "s"}; the cron job sends them within a minute:`);
    for (const { event_id, receipt_id, shard } of moved) console.log(`  ${event_id}\tshard=${shard}\treceipt=${receipt_id}`);
  }
  if (fuller.length > 0) console.log(`Shard(s) ${fuller.join(", ")} replayed ${REPLAY_PAGE} each, the most one run takes: run the command again for the rest.`);
  // A shard that failed, after the local state's waits, is named with what stays failed there and
  // what the run did replay, so that a half-done replay never passes for a whole one.
  const notReplayed = failures.map(({ shard }) => {
    const ids = [...byShard].find(([{ name }]) => name === shard)?.[1];
    return `Not replayed: ${ids ? ids.join(", ") : "every failed notice"} of shard ${shard}, still in the failed list.`;
  });
  const problems = [
    ...failures.map((failure) => failure.message),
    ...notReplayed,
    ...(failures.length > 0 ? [`Replayed: ${moved.length === 0 ? "nothing" : `the ${moved.length} listed on standard output`}. Run the same command again for the rest.`] : []),
    ...(missing.length > 0 ? [`No failed notice ${missing.join(", ")}; see 'npm run notices -- failed'.`] : []),
  ];
  if (problems.length > 0) throw new Error(problems.join("\n"));
}
