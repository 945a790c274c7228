/**
 * The soak's fault plan: which faults strike when, drawn from the seed before the run starts, so
 * that a seed replays the same plan whatever the load's timing. Every kind of timed fault is
 * planned at least once, however short the run.
 */
import type { Prng } from "./prng.ts";

/** A fault that lasts a while, from `at` seconds into the load for `seconds`. */
export type TimedFault =
  /** A share of one shard's D1 calls fail, in the API Worker or in the notifier. */
  | { kind: "d1"; worker: "api" | "notifier"; shard: string; share: number; at: number; seconds: number }
  /** A share of the API Worker's queue sends fail. */
  | { kind: "queue"; share: number; at: number; seconds: number }
  /**
   * The push service answers 500 to everything, for longer than the queue's retries once carried
   * an event (QUEUE_SCHEDULE_SECONDS): nothing may need an operator afterwards.
   */
  | { kind: "push outage"; at: number; seconds: number }
  /** The push service answers 401 to everything: every event pushed meanwhile is dead-lettered. */
  | { kind: "push refused"; at: number; seconds: number }
  /** An operator closes a shard (`npm run shards -- close`) and opens it again. */
  | { kind: "shard closed"; shard: string; at: number; seconds: number };

/** A fault of a moment: the whole runtime (the notifier mid-batch among it) is stopped and started. */
export interface Restart {
  kind: "restart";
  at: number;
}

export type PlannedFault = TimedFault | Restart;

/**
 * How long the soak's push outages took to dead-letter events when the queue's retries were the
 * schedule (3 retries, 1 s doubling to 2 s). Every planned outage is longer.
 */
export const QUEUE_SCHEDULE_SECONDS = 1 + 2 + 2;

/** Share of pushes the receiver answers badly outside outages. */
export const PUSH_FAULT_RATE = 0.12;

/**
 * Plans the faults of a load of `seconds` over `shards`: each kind about once a minute (a D1
 * fault in the API about every 40 s), at random times within the load, sorted by start.
 */
export function planFaults(prng: Prng, seconds: number, shards: readonly string[]): PlannedFault[] {
  const times = (perSecond: number) => Math.max(1, Math.round(seconds * perSecond));
  // Starts fall within the load's first 85 %, so each fault plays out while requests still flow.
  const start = () => prng.between(0.05, 0.85) * seconds;
  const length = (min: number, max: number) => Math.min(prng.between(min, max), seconds * 0.3);
  const plan: PlannedFault[] = [];
  for (let i = 0; i < times(1 / 40); i += 1) {
    plan.push({ kind: "d1", worker: "api", shard: prng.pick(shards), share: prng.between(0.3, 1), at: start(), seconds: length(2, 5) });
  }
  for (let i = 0; i < times(1 / 60); i += 1) {
    // The notifier makes few D1 calls a second, so all of them fail while the fault lasts.
    plan.push({ kind: "d1", worker: "notifier", shard: prng.pick(shards), share: 1, at: start(), seconds: length(4, 8) });
    plan.push({ kind: "queue", share: prng.between(0.3, 1), at: start(), seconds: length(3, 8) });
    plan.push({ kind: "push outage", at: start(), seconds: Math.max(QUEUE_SCHEDULE_SECONDS + 3, length(8, 25)) });
    plan.push({ kind: "push refused", at: start(), seconds: length(2, 5) });
    plan.push({ kind: "shard closed", shard: prng.pick(shards), at: start(), seconds: length(5, 15) });
    plan.push({ kind: "restart", at: start() });
  }
  // One shard closed at a time: adds need an open one.
  return plan.sort((a, b) => a.at - b.at).filter(
    (fault, i, sorted) =>
      fault.kind !== "shard closed" ||
      !sorted.slice(0, i).some((other) => other.kind === "shard closed" && other.at + other.seconds > fault.at),
  );
}

/** The end of a fault, in seconds into the load; a restart's is its start. */
export function faultEnd(fault: PlannedFault): number {
  return fault.kind === "restart" ? fault.at : fault.at + fault.seconds;
}
