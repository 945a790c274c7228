/**
 * The flooding client's account (docs/reliability.md, "The flooding client"): what it sent,
 * what was stored and refused, against the most its limit lets through over the run. The tills'
 * own answers are reconciled with everyone else's; a till that got a 429 is an unexpected answer
 * there.
 */
import { formatTable } from "../harness/table.ts";
import { FLOOD_ACTION, type LoadRecord } from "./load.ts";

/** What the flooding client got, and its limit's bound over the run. */
export interface FloodSummary {
  sent: number;
  stored: number;
  limited: number;
  /** Answered neither 200 nor 429: a 5xx of a fault, or no answer across a restart. */
  other: number;
  /** Seconds from its first request to its last answer. */
  seconds: number;
  quota: number;
  windowSeconds: number;
  /**
   * The most the limit lets through in that time: its quota in every window the run touched, the
   * first and last perhaps in part (windows are fixed, so a burst across a window's end counts in
   * both).
   */
  bound: number;
}

/** Sums up the flood's requests in `load` against a limit of `quota` per `windowSeconds`. */
export function floodSummary(load: LoadRecord, limit: { quota: number; windowSeconds: number }): FloodSummary {
  const requests = load.requests.filter((request) => request.action === FLOOD_ACTION);
  const first = Math.min(...requests.map((request) => request.start));
  const last = Math.max(...requests.map((request) => request.end));
  const windowMs = limit.windowSeconds * 1000;
  const windows = requests.length === 0 ? 0 : Math.floor(last / windowMs) - Math.floor(first / windowMs) + 1;
  const stored = requests.filter((request) => request.status === 200).length;
  const limited = requests.filter((request) => request.status === 429).length;
  return {
    sent: requests.length,
    stored,
    limited,
    other: requests.length - stored - limited,
    seconds: requests.length === 0 ? 0 : (last - first) / 1000,
    ...limit,
    bound: windows * limit.quota,
  };
}

/** The flood's table. */
export function floodTable(flood: FloodSummary): string {
  return formatTable(
    ["flooding client (ignores 429, sends at once)", "count"],
    [
      ["adds sent", String(flood.sent)],
      ["stored (200)", String(flood.stored)],
      ["refused over its limit (429)", String(flood.limited)],
      ["other (5xx of a fault, no answer)", String(flood.other)],
      [`limit ${flood.quota} per ${flood.windowSeconds} s over ${flood.seconds.toFixed(1)} s: at most`, String(flood.bound)],
    ],
  );
}

/** What the flood must show: refusals, and no more stored than its limit's bound. */
export function floodFailures(flood: FloodSummary): string[] {
  return [
    ...(flood.limited === 0 ? ["the flooding client never met its limit (no 429)"] : []),
    ...(flood.stored > flood.bound ? [`the flooding client stored ${flood.stored} receipts, over its limit's ${flood.bound}`] : []),
  ];
}
