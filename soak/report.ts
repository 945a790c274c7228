/** The soak's table: requests by route and answer, faults by kind, events, and what went wrong. */
import { formatTable } from "../harness/table.ts";
import type { ExportCheck } from "./app-jobs.ts";
import type { ErasureRecord, Route } from "./load.ts";
import { PROBLEMS, type AnswerClass, type Reconciliation } from "./reconcile.ts";
import type { InjectedCalls } from "./protocol.ts";
import type { Delivery } from "./receiver.ts";
import type { FaultWindow } from "./reconcile.ts";
import type { Drain } from "./store.ts";
import { QUEUE_SCHEDULE_SECONDS } from "./plan.ts";

/** Every kind of fault the soak injects, and how many times it struck. */
export type FaultCounts = Record<string, number>;

/** Examples printed of each problem found; the count says how many there are. */
const SHOWN_PER_PROBLEM = 5;

/** The counts of each fault kind, from the receiver's log, the wrappers' counts and the windows. */
export function countFaults(
  deliveries: readonly Delivery[],
  injected: Record<"api" | "notifier", InjectedCalls>,
  windows: readonly FaultWindow[],
  restartsMidBatch: number,
): FaultCounts {
  const outcomes = (outcome: Delivery["outcome"]) => deliveries.filter((delivery) => delivery.outcome === outcome).length;
  const calls = (counts: InjectedCalls, kind: string) => (counts[`${kind} before`] ?? 0) + (counts[`${kind} after`] ?? 0);
  return {
    "push answered 500": outcomes("push 500"),
    "push answered 429 with Retry-After": outcomes("push 429"),
    "push answered slowly, within the timeout": outcomes("push slow"),
    "push answered beyond the timeout": outcomes("push timeout"),
    "push connection dropped": outcomes("push dropped"),
    "push service down (pushes answered 500)": outcomes("push outage"),
    "push refused for good (401): dead-lettered": outcomes("push refused"),
    "queue send failed (API)": calls(injected.api, "queue"),
    "D1 call failed (API)": calls(injected.api, "d1"),
    "D1 call failed (notifier)": calls(injected.notifier, "d1"),
    "R2 call failed (API, the archive's move)": calls(injected.api, "r2"),
    "shard closed and reopened": windows.filter((window) => window.kind === "shard closed").length,
    "runtime restarted": windows.filter((window) => window.kind === "restart").length,
    "runtime restarted, notifier mid-batch": restartsMidBatch,
  };
}

export function printReport(summary: {
  heading: string;
  result: Reconciliation;
  faults: FaultCounts;
  drain: Drain;
  windows: readonly FaultWindow[];
  erasures: readonly ErasureRecord[];
  exports: ExportCheck;
  failures: readonly string[];
}): void {
  const { result, faults, drain } = summary;
  const classes: AnswerClass[] = ["2xx", "4xx expected", "4xx unexpected", "5xx", "no answer"];
  const routes: Route[] = ["login", "add", "delete"];
  const lines = [
    summary.heading,
    "",
    formatTable(["requests", ...classes], routes.map((route) => [route, ...classes.map((kind) => String(result.answers[route][kind]))])),
    "",
    formatTable(["faults injected", "count"], Object.entries(faults).map(([kind, count]) => [kind, String(count)])),
    "",
    formatTable(
      ["events", "count"],
      [
        ["receipt.created delivered", String(result.events.created)],
        ["  of them added in DR Retail, model and original checked", String(result.events.drCreated)],
        ["receipt.deleted delivered", String(result.events.deleted)],
        ["created not sent: receipt deleted first", String(result.events.createdSkipped)],
        ["app_user.erased delivered (receipts erased)", `${result.events.erased} (${result.events.receiptsErased})`],
        ["adds racing an erasure of their user: erased / kept", `${result.events.racing.erased} / ${result.events.racing.kept}`],
        ["duplicates (a webhook-id again)", String(result.events.duplicates)],
        ["delivery delay p50 / p99 / max (ms)", `${result.events.delayMs.p50} / ${result.events.delayMs.p99} / ${result.events.delayMs.max}`],
        ["5xx or no answer, explained by a fault", `${result.failedRequests.explained} of ${result.failedRequests.total}`],
        ["dead letters replayed (replays)", `${drain.replayed} (${drain.replays})`],
        ["of them not refused for good: ran out of retries", String(drain.afterRetries.length)],
        [`longest push outage (queue retries once gave up after ${QUEUE_SCHEDULE_SECONDS} s)`, `${(outageMs(summary.windows) / 1000).toFixed(1)} s`],
        [`drain (${drain.complete ? "complete" : "INCOMPLETE"})`, `${drain.seconds.toFixed(1)} s`],
      ],
    ),
    "",
    formatTable(
      ["exports through the API", "count"],
      [
        ["during the load / after the archive", `${summary.exports.checked.load} / ${summary.exports.checked["after archive"]}`],
        ["receipt lines checked (archived)", `${summary.exports.receipts} (${summary.exports.archived})`],
        ["receipts racing an export: in or out either way", String(summary.exports.undecided)],
        ["files an erasure of their user then took", String(summary.exports.erasedAfter)],
      ],
    ),
    "",
    formatTable(
      ["problems", "count"],
      [...PROBLEMS.map((problem) => [problem, String(result.problems[problem].length)]), ["export mismatch", String(summary.exports.problems.length)]],
    ),
    "",
    scanTable(summary.erasures),
  ];
  console.log(lines.join("\n"));
  for (const problem of PROBLEMS) printExamples(problem, result.problems[problem]);
  printExamples("export mismatch", summary.exports.problems);
  printExamples("dead-lettered after retries", drain.afterRetries);
  summary.erasures.forEach((erasure, i) => {
    if (erasure.scan && erasure.scan.findings.length > 0) printExamples(`erasure ${i + 1} of ${erasure.appUserId}: copies found`, erasure.scan.findings);
  });
  if (summary.failures.length > 0) console.log(`\nFAILED:\n  ${summary.failures.join("\n  ")}`);
}

/**
 * One row per erasure: what reading every byte of the state for its app user found once it
 * completed. Rows explained are the erasure's own event and receipts added after its instant;
 * SQLite's bytes keep copies of those rows and freed copies of deleted ones (docs/storage.md,
 * "Erasure and freed bytes"); a finding is a copy in any other file or a live row nothing explains.
 */
function scanTable(erasures: readonly ErasureRecord[]): string {
  const rows = erasures.map((erasure, i) => {
    const label = `${i + 1}: ${erasure.appUserId} by the ${erasure.via} (${erasure.receiptsErased ?? "-"} erased)`;
    const { scan } = erasure;
    if (!scan) return [label, "-", "-", "-", "-", "not scanned: the erasure failed"];
    const result = scan.findings.length === 0 ? "no copy" : `${scan.findings.length} FOUND`;
    return [label, String(scan.files), (scan.bytes / 1e6).toFixed(1), String(scan.explainedRows), String(scan.databaseCopies), result];
  });
  return formatTable(["erasure scans (state read after each)", "files", "MB", "rows explained", "copies in SQLite bytes", "result"], rows);
}

function printExamples(problem: string, found: readonly string[]): void {
  if (found.length === 0) return;
  console.log(`\n${problem}:`);
  for (const line of found.slice(0, SHOWN_PER_PROBLEM)) console.log(`  ${line}`);
  if (found.length > SHOWN_PER_PROBLEM) console.log(`  ... and ${found.length - SHOWN_PER_PROBLEM} more`);
}

// The longest push outage as it really happened (windows may overlap: the receiver is down while any is on).
function outageMs(windows: readonly FaultWindow[]): number {
  const outages = windows.filter((window) => window.kind === "push outage").sort((a, b) => a.start - b.start);
  let longest = 0;
  let current: { start: number; end: number } | undefined;
  for (const { start, end } of outages) {
    if (current && start <= current.end) current.end = Math.max(current.end, end);
    else current = { start, end };
    longest = Math.max(longest, current.end - current.start);
  }
  return longest;
}
