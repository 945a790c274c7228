/**
 * The archive's move on one shard as a Cloudflare Workflow (docs/storage.md "Archive"): the cron
 * starts an instance per shard and day, `npm run archive -- run` one now, each with
 * `{"shard"}`, and the steps of src/storage/archive/move.ts run as durable steps, so that an
 * instance cut off anywhere resumes with the same end state. Its output is what it did
 * (`ArchiveRun`).
 */
import { NonRetryableError } from "cloudflare:workflows";
import { WorkflowEntrypoint, type WorkflowEvent, type WorkflowStep } from "cloudflare:workers";
import { apiConfig } from "../../shared/config.ts";
import type { ApiEnv } from "../../shared/env.ts";
import { describeError, logLine } from "../../shared/log.ts";
import { importAuditHashKey, pseudonymWith } from "../../shared/audit-hash-key.ts";
import { renameLegacyObjects } from "../../storage/archive/legacy.ts";
import { archiveShard, type ArchiveRun } from "../../storage/archive/move.ts";
import { durableSteps, jobShardsOf, startOnce } from "./durable.ts";

/** What starts a move. */
export interface ArchiveParams {
  shard: string;
  /** Which part of a move too large for one instance this is: 1 for the second, and so on. */
  part?: number;
}

/** The kind `npm run jobs` shows for an instance of this Workflow. */
export const ARCHIVE_JOB = "archive";

/**
 * The instance the cron starts for a shard on the UTC day of `now`: one ID per shard and day, so a
 * second start the same day fails and changes nothing.
 */
export function dailyArchiveId(shard: string, now: Date): string {
  return `archive-${shard}-${now.toISOString().slice(0, 10)}`;
}

/**
 * The instance that goes on with a move that stopped at its steps' limit (ARCHIVE_MAX_PAGES): the
 * same ID with the part's number, so a second start of it changes nothing.
 */
export function nextPartId(instanceId: string, part: number): string {
  return `${instanceId.replace(/-part-\d+$/, "")}-part-${part + 1}`;
}

/**
 * The move's Workflow, bound as ARCHIVING in wrangler.jsonc. A move that stops at its steps'
 * limit starts the next part, so that a shard whose receipts all reach the age on one day (a
 * shard fills in hours at 10,000 stores) is emptied that day. A step that gives up fails the
 * instance with an error log line (`"event": "job"`) an alert can match; the next day's instance
 * moves what it left.
 */
export class ArchiveWorkflow extends WorkflowEntrypoint<ApiEnv, ArchiveParams> {
  override async run(event: Readonly<WorkflowEvent<ArchiveParams>>, step: WorkflowStep): Promise<ArchiveRun> {
    const shards = jobShardsOf(this.env);
    const shard = shards.find(({ name }) => name === event.payload?.shard);
    if (!shard) throw new NonRetryableError("shard is not one of this Worker's shards");
    const steps = durableSteps(step);
    const config = apiConfig(this.env);
    const part = event.payload.part ?? 0;
    try {
      if (part === 0) {
        const hashKey = await importAuditHashKey(config.auditHashKey);
        await renameLegacyObjects(this.env.ARCHIVE, shards, (id) => pseudonymWith(hashKey, id), steps);
      }
      const moved = await archiveShard(
        shard,
        this.env.ARCHIVE,
        config.auditHashKey,
        { runId: event.instanceId, archiveAfterMs: config.archiveAfterMs, steps },
      );
      if (!moved.complete) {
        await steps("start the next part", async () => {
          const id = nextPartId(event.instanceId, part);
          await startOnce(this.env.ARCHIVING, id, { shard: shard.name, part: part + 1 });
          return id;
        });
      }
      return moved;
    } catch (error) {
      logLine("error", "job", { job: ARCHIVE_JOB, instance_id: event.instanceId, outcome: "failed", cause: describeError(error) });
      throw error;
    }
  }
}
