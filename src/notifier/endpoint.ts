/**
 * The push service as one isolate of the notifier sees it (docs/reliability.md#backing-off-as-a-whole):
 * up, or down after DOWN_AFTER_FAILURES pushes in a row failed, and while it is down, the probe
 * gate on the home shard that lets one push through now and then. src/notifier/deliver.ts hands
 * each batch through here, with how to deliver messages and how to try one again later.
 */
import type { NotifierEnv } from "../shared/env.ts";
import type { DeliveryTiming, PushTarget } from "../shared/config.ts";
import { describeError, logLine } from "../shared/log.ts";
import type { QueuedNotice } from "../shared/types.ts";
import { markEndpointDown, markEndpointUp, takeProbe, type ProbeGate } from "../storage/outbox/operations.ts";
import { shardsOf } from "../storage/shards.ts";

/**
 * How many pushes in a row, with none getting through between them, an isolate sees fail
 * (408, 429, 5xx, no answer) before it records the push service as down: one failure is the
 * event's own retry, three in a row is the push service.
 */
const DOWN_AFTER_FAILURES = 3;

/**
 * What one isolate knows of the push service between batches (the notifier's isolate state):
 * whether it was last seen down, how many pushes failed in a row since one got through, and when
 * it last asked the home shard (another isolate may have found it down; epoch ms).
 */
export interface EndpointView {
  down: boolean;
  failuresInARow: number;
  /**
   * Null before the isolate's first batch, which counts as a look: a new isolate's first batches
   * cost no extra round trip (during an outage its own failed pushes tell it soon enough). Not
   * the time the view is made: a Worker's clock stands still outside a request.
   */
  checkedAt: number | null;
}

/** An isolate's view before its first batch: up. */
export function freshEndpointView(): EndpointView {
  return { down: false, failuresInARow: 0, checkedAt: null };
}

/** How one push went, for the isolate's view of the push service. */
export interface PushOutcome {
  ok: boolean;
  /** A failure that says "later" (408, 429, 5xx, no answer), as a push service that is down gives. */
  retryable: boolean;
}

/** What every push of one batch shares: the Worker's bindings, where pushes go, the timing, the batch's time. */
export interface BatchRun {
  env: NotifierEnv;
  target: PushTarget;
  timing: DeliveryTiming;
  now: Date;
}

/** How a batch's messages are delivered, and how one is tried again later after an error. */
export interface Delivery {
  /** Delivers the messages; returns how each push went. */
  deliver: (messages: readonly Message<QueuedNotice>[]) => Promise<PushOutcome[]>;
  retryLater: (message: Message<QueuedNotice>, error: unknown) => void;
}

/**
 * Delivers a batch's messages as the push service's state allows: all of them while it is seen
 * up; while it is down, one probe when the home shard grants the slot, and the rest only once the
 * probe got through; without the slot, every message acked unpushed. Updates `endpoint` in place:
 * it is the isolate's, kept between batches.
 */
export async function throughEndpoint(messages: readonly Message<QueuedNotice>[], endpoint: EndpointView, run: BatchRun, delivery: Delivery): Promise<void> {
  const { env, target, timing, now } = run;
  const home = shardsOf(env)[0];
  endpoint.checkedAt ??= now.getTime();
  const ask = endpoint.down || now.getTime() - endpoint.checkedAt >= timing.probeMs;
  if (target.kind !== "push" || !home || !ask) {
    await deliverWatching(messages, endpoint, run, delivery);
    return;
  }
  let gate: ProbeGate;
  try {
    gate = await takeProbe(home.db, now, timing.probeMs);
  } catch (error) {
    // The home shard unreachable: an isolate that saw the push service up goes on delivering;
    // one that saw it down tries the batch again later, pushing nothing meanwhile.
    logLine("error", "push-endpoint", { outcome: "probe slot not read", cause: describeError(error) });
    if (!endpoint.down) await deliverWatching(messages, endpoint, run, delivery);
    else for (const message of messages) delivery.retryLater(message, error);
    return;
  }
  endpoint.checkedAt = now.getTime();
  if (gate === "up") {
    endpoint.down = false;
    await deliverWatching(messages, endpoint, run, delivery);
    return;
  }
  endpoint.down = true;
  // The probe is the first message that comes to a push: one that needs none (delivered, held,
  // not to be sent) is dealt with as always and the next one tried.
  let next = 0;
  while (gate === "probe" && next < messages.length) {
    const pushes = await delivery.deliver(messages.slice(next, next + 1));
    next += 1;
    if (pushes.length === 0) continue;
    if (pushes[0]!.ok) {
      logLine("info", "push-endpoint", { outcome: "probe got through; delivering" });
      Object.assign(endpoint, { down: false, failuresInARow: 0 });
      try {
        await markEndpointUp(shardsOf(env).map(({ db }) => db), now);
      } catch (error) {
        // A shard whose write failed learns it from its own next push that gets through.
        logLine("error", "push-endpoint", { outcome: "up not recorded", cause: describeError(error) });
      }
      await deliverWatching(messages.slice(next), endpoint, run, delivery);
      return;
    }
    gate = "wait";
  }
  const parked = messages.slice(next);
  for (const message of parked) message.ack();
  if (parked.length > 0) logLine("info", "notice-delivery", { outcome: "acked unpushed: push service down", events: parked.length });
}

// Delivers, then records the push service as down once DOWN_AFTER_FAILURES pushes in a row failed.
async function deliverWatching(messages: readonly Message<QueuedNotice>[], endpoint: EndpointView, run: BatchRun, delivery: Delivery): Promise<void> {
  const { env, timing, now } = run;
  const pushes = await delivery.deliver(messages);
  for (const push of pushes) endpoint.failuresInARow = push.ok ? 0 : push.retryable ? endpoint.failuresInARow + 1 : endpoint.failuresInARow;
  const home = shardsOf(env)[0];
  if (endpoint.down || endpoint.failuresInARow < DOWN_AFTER_FAILURES || !home) return;
  endpoint.down = true;
  logLine("warn", "push-endpoint", { outcome: "down: probing", failures_in_a_row: endpoint.failuresInARow });
  try {
    await markEndpointDown(shardsOf(env).map(({ db }) => db), now, timing.probeMs);
  } catch (error) {
    // This isolate probes anyway; the others find out by their own failures.
    logLine("error", "push-endpoint", { outcome: "down not recorded", cause: describeError(error) });
  }
}
