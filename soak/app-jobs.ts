/**
 * The soak's app side acting for shoppers (docs/api.md#jobs): it exports an app user's data and
 * erases app users over the API, as the app push service's client, through the example's own
 * calls (examples/app-jobs.ts), and checks each export against the soak's own record of that
 * user's receipts: nothing missing, nothing of another user, nothing twice or cut in half, and,
 * once an erasure of the user followed it, no chunk of its file left in the bucket.
 *
 * The record decides by the export's instant (its `occurred_at`): a receipt is in it when its
 * add's created_at is at or before the instant and neither a delete answered before the instant
 * nor an erasure whose instant precedes it took it. A delete whose commit may lie on either side
 * of the instant (sent before it, answered after it, or never answered) leaves the receipt
 * undecided, as does an add never answered (its receipt, if stored, is matched by its marker):
 * such a receipt may be in or out, but whole and once.
 */
import { setTimeout as sleep } from "node:timers/promises";
import type { AppClient } from "../examples/app-feed.ts";
import { exportUser, forgetUser } from "../examples/app-jobs.ts";
import { exportPrefix } from "../src/storage/export.ts";
import type { Erasure } from "../src/storage/erasure.ts";
import type { ErasureRecord, LoadRecord, RequestRecord } from "./load.ts";
import { ERASE_PATH } from "./protocol.ts";
import type { StoreSnapshot } from "./reconcile.ts";
import type { SoakRuntime } from "./runtime.ts";

/** One export the app side asked for, and what its file held. */
export interface ExportRecord {
  appUserId: string;
  /** While the tills were adding and deleting, or once everything was archived and quiet. */
  phase: "load" | "after archive";
  /** ms since the epoch: the first attempt's start, the successful attempt's end. */
  start: number;
  end: number;
  attempts: number;
  /** Why each failed attempt failed. */
  errors: string[];
  jobId?: string;
  occurredAt?: string;
  /** The file's lines, parsed; a line that is not JSON is kept as its text. */
  lines?: (Record<string, unknown> | string)[];
}

const ATTEMPTS = 5;
const PAUSE_MS = 1000;
// Four polls a second keep a job's follower well inside the jobs' limit per client; a job still
// running after a minute is given up, and the export asked for again.
const POLLING = { pollMs: 250, timeoutMs: 60_000 } as const;

/** Exports `appUserId`'s data over the API, trying again (a new job) after a failure. */
export async function exportOverApi(client: AppClient, appUserId: string, phase: ExportRecord["phase"]): Promise<ExportRecord> {
  const record: ExportRecord = { appUserId, phase, start: Date.now(), end: 0, attempts: 0, errors: [] };
  while (record.attempts < ATTEMPTS && !record.lines) {
    record.attempts += 1;
    try {
      const { job, file } = await exportUser(client, appUserId, POLLING);
      const lines = file.split("\n").filter((line) => line !== "").map(parsed);
      Object.assign(record, { jobId: job.job_id, occurredAt: job.occurred_at, lines });
    } catch (error) {
      record.errors.push((error as Error).message);
      await sleep(PAUSE_MS);
    }
  }
  record.end = Date.now();
  return record;
}

/**
 * Erases `appUserId` over the API; returns the erasure's output, read from its Workflow instance
 * as the operator's own erasures are (the job's state names no event, which the reconciliation
 * follows to the app).
 */
export async function eraseOverApi(runtime: SoakRuntime, client: AppClient, appUserId: string): Promise<Erasure> {
  const { job } = await forgetUser(client, appUserId, POLLING);
  const answer = await fetch(`${runtime.apiUrl}${ERASE_PATH}?id=${encodeURIComponent(job.job_id)}`);
  return ((await answer.json()) as { output: Erasure }).output;
}

function parsed(line: string): Record<string, unknown> | string {
  try {
    return JSON.parse(line) as Record<string, unknown>;
  } catch {
    return line;
  }
}

/** What the checks found: problems, and what they covered. */
export interface ExportCheck {
  problems: string[];
  /** Exports whose file was checked, by phase; exports that failed every attempt. */
  checked: Record<ExportRecord["phase"], number>;
  failed: number;
  /** Receipt lines checked, of them archived, and those the record left undecided. */
  receipts: number;
  archived: number;
  undecided: number;
  /** Exports an erasure of their user followed, whose file was then gone as it must be. */
  erasedAfter: number;
}

/**
 * Checks every export: those made during the load against the load's record, those made once
 * everything was archived against the store itself; then that an erasure of the user took the
 * file of every export that completed before it began, and that the others' files are kept.
 */
export async function checkExports(
  exports: readonly ExportRecord[],
  load: LoadRecord,
  store: StoreSnapshot,
  bucket: { list(options: { prefix: string }): Promise<{ objects: unknown[] }> },
): Promise<ExportCheck> {
  const check: ExportCheck = { problems: [], checked: { load: 0, "after archive": 0 }, failed: 0, receipts: 0, archived: 0, undecided: 0, erasedAfter: 0 };
  const record = new ReceiptRecord(load);
  for (const exported of exports) {
    if (!exported.lines) {
      check.failed += 1;
      check.problems.push(`export of ${exported.appUserId} (${exported.phase}): failed ${exported.attempts} times, last: ${exported.errors.at(-1)}`);
      continue;
    }
    check.checked[exported.phase] += 1;
    const expected =
      exported.phase === "load"
        ? record.at(exported.appUserId, exported.occurredAt!)
        : { present: new Set(store.receipts.filter((row) => row.app_user_id === exported.appUserId).map((row) => row.receipt_id)), undecided: new Set<string>() };
    check.undecided += expected.undecided.size;
    const found = checkFile(exported, expected, record, check.problems);
    check.receipts += found.receipts;
    check.archived += found.archived;
    // The erasures of the user that ran after the export began. One that began after the soak saw
    // the export complete must take its file; one that began before may have, since the export
    // completed on the service before the soak's poll saw it, and so may one that failed part-way.
    const later = load.erasures.filter((erasure) => erasure.appUserId === exported.appUserId && erasure.end >= exported.start);
    const erasedAfter = later.some((erasure) => erasure.occurredAt !== undefined && erasure.start > exported.end);
    const chunks = (await bucket.list({ prefix: exportPrefix(exported.jobId!) })).objects.length;
    if (erasedAfter && chunks > 0) check.problems.push(`export ${exported.jobId} of ${exported.appUserId}: ${chunks} chunks left after an erasure of the user`);
    if (later.length === 0 && chunks === 0) check.problems.push(`export ${exported.jobId} of ${exported.appUserId}: its file is gone, though no erasure of the user followed`);
    if (erasedAfter && chunks === 0) check.erasedAfter += 1;
  }
  return check;
}

/** Receipts an export must hold, and those it may hold or not. */
interface Expected {
  present: Set<string>;
  undecided: Set<string>;
}

// One export's file against what it must hold: every line whole, each receipt once, of this user,
// made at or before the instant, none known gone by then, none missing; the summary last, counting them.
function checkFile(exported: ExportRecord, expected: Expected, record: ReceiptRecord, problems: string[]): { receipts: number; archived: number } {
  const label = `export ${exported.jobId} of ${exported.appUserId} (${exported.phase}, as of ${exported.occurredAt})`;
  const lines = exported.lines!;
  const receipts = lines.filter((line): line is Record<string, unknown> => typeof line !== "string" && "receipt_id" in line);
  for (const line of lines) if (typeof line === "string") problems.push(`${label}: a line that is not JSON: ${line.slice(0, 80)}`);
  const seen = new Set<string>();
  for (const line of receipts) {
    const receiptId = String(line.receipt_id);
    if (seen.has(receiptId)) problems.push(`${label}: ${receiptId} twice`);
    seen.add(receiptId);
    const marker = (line.receipt as { pos_receipt_number?: string } | undefined)?.pos_receipt_number;
    const owner = marker === undefined ? undefined : record.ownerOf(marker);
    if (owner !== exported.appUserId) problems.push(`${label}: ${receiptId} is ${owner === undefined ? "no receipt the tills sent" : `of ${owner}`}`);
    else if (String(line.created_at) > exported.occurredAt!) problems.push(`${label}: ${receiptId} was made after the instant, at ${String(line.created_at)}`);
    else if (!expected.present.has(receiptId) && !expected.undecided.has(receiptId) && record.known(receiptId)) problems.push(`${label}: ${receiptId} was gone by the instant`);
  }
  for (const receiptId of expected.present) if (!seen.has(receiptId)) problems.push(`${label}: ${receiptId} missing (${record.describe(receiptId)})`);
  const summary = lines.at(-1);
  const counts = typeof summary === "string" ? undefined : (summary?.summary as { job_id?: string; receipts?: number; archived_receipts?: number } | undefined);
  const archived = receipts.filter((line) => line.archived === true).length;
  if (!counts) problems.push(`${label}: no summary line last`);
  else if (counts.job_id !== exported.jobId || counts.receipts !== receipts.length || counts.archived_receipts !== archived) {
    problems.push(`${label}: the summary counts ${counts.receipts} receipts (${counts.archived_receipts} archived), the file holds ${receipts.length} (${archived})`);
  }
  return { receipts: receipts.length, archived };
}

/** The load's record of each app user's receipts: who added which, when, and what took it. */
class ReceiptRecord {
  /** Every add of a marker: the first call, its retries and replays, all for one app user. */
  readonly #addsOf = new Map<string, RequestRecord[]>();
  readonly #added = new Map<string, { appUserId: string; createdAt: string; marker: string }>();
  readonly #deletes = new Map<string, RequestRecord[]>();
  readonly #erasures: readonly ErasureRecord[];

  constructor(load: LoadRecord) {
    for (const request of load.requests) {
      if (request.route === "add" && request.marker && request.appUserId) {
        this.#addsOf.set(request.marker, [...(this.#addsOf.get(request.marker) ?? []), request]);
      }
      if (request.route === "add" && request.status === 200 && request.marker && request.receiptId && request.createdAt && request.appUserId) {
        this.#added.set(request.receiptId, { appUserId: request.appUserId, createdAt: request.createdAt, marker: request.marker });
      }
    }
    for (const request of load.requests) {
      // A delete naming another app user than the receipt's takes nothing.
      if (request.route !== "delete" || !request.receiptId || this.#added.get(request.receiptId)?.appUserId !== request.appUserId) continue;
      this.#deletes.set(request.receiptId, [...(this.#deletes.get(request.receiptId) ?? []), request]);
    }
    this.#erasures = load.erasures;
  }

  /** The app user whose add sent the receipt of `marker`. */
  ownerOf(marker: string): string | undefined {
    return this.#addsOf.get(marker)?.[0]?.appUserId;
  }

  /** Whether an add's answer named the receipt. */
  known(receiptId: string): boolean {
    return this.#added.has(receiptId);
  }

  /**
   * What the record knows of a receipt, for a problem's line: when it was made, every add of its
   * body (the first call, its retries and replays, with what each answered), and its deletes.
   */
  describe(receiptId: string): string {
    const added = this.#added.get(receiptId);
    const span = (request: RequestRecord) => `${request.status ?? "unanswered"} ${new Date(request.start).toISOString()}..${new Date(request.end).toISOString()}`;
    const adds = (added ? (this.#addsOf.get(added.marker) ?? []) : []).map((request) => `${request.action} ${span(request)}${request.receiptId ? ` named ${request.receiptId}` : ""}`);
    const deletes = (this.#deletes.get(receiptId) ?? []).map((request) => `delete ${span(request)}`);
    return [`created ${added?.createdAt}`, ...adds, ...deletes].join("; ");
  }

  /** What an export of `appUserId` at `instant` must hold, and what it may. */
  at(appUserId: string, instant: string): Expected {
    const expected: Expected = { present: new Set(), undecided: new Set() };
    const instantMs = Date.parse(instant);
    for (const [receiptId, { appUserId: owner, createdAt }] of this.#added) {
      if (owner !== appUserId || createdAt > instant) continue;
      const erasures = this.#erasures.filter((erasure) => erasure.appUserId === appUserId);
      if (erasures.some((erasure) => erasure.occurredAt !== undefined && erasure.occurredAt < instant && createdAt <= erasure.occurredAt)) continue;
      const deletes = this.#deletes.get(receiptId) ?? [];
      if (deletes.some((request) => request.status === 200 && request.end < instantMs)) continue;
      const racing =
        deletes.some((request) => request.start <= instantMs && (request.status === 200 || request.status === null || request.status >= 500)) ||
        erasures.some((erasure) => erasure.occurredAt === undefined && erasure.start <= instantMs);
      (racing ? expected.undecided : expected.present).add(receiptId);
    }
    return expected;
  }
}
