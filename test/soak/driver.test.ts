/**
 * The soak's fault driver (soak/driver.ts) on a runtime and a receiver that only record what they
 * are told: a restart waits for a push to hold without freezing the other faults, never runs while
 * the driver has a call on the runtime under way, and lets no operator work begin until it is over.
 */
import { setTimeout as sleep } from "node:timers/promises";
import { describe, expect, it } from "vitest";
import { FaultDriver } from "../../soak/driver.ts";
import type { PlannedFault } from "../../soak/plan.ts";
import { Prng } from "../../soak/prng.ts";
import type { BindingFaults } from "../../soak/protocol.ts";
import type { PushReceiver } from "../../soak/receiver.ts";
import type { SoakRuntime } from "../../soak/runtime.ts";
import { shardNamed } from "../../src/shared/shard-ids.ts";

/** A runtime whose calls take a few ms and fail while it restarts, and a receiver whose first push comes at `pushAtMs`. */
function fakes(pushAtMs: number) {
  const log: string[] = [];
  const started = Date.now();
  let restarting = false;
  let calls = 0;
  const at = () => Date.now() - started;
  const runtime = {
    shards: [shardNamed("s1")],
    async setFaults(worker: string, faults: BindingFaults) {
      if (restarting) throw new Error("a call while the runtime restarts");
      calls += 1;
      await sleep(5);
      calls -= 1;
      log.push(`${worker} d1 ${JSON.stringify(faults.d1)} at ${at()}`);
    },
    async restart() {
      if (calls > 0) throw new Error("a restart under a call");
      restarting = true;
      log.push(`restart at ${at()}`);
      await sleep(20);
      restarting = false;
    },
  } as unknown as SoakRuntime;
  const receiver = {
    setOutage() {},
    setRefusing() {},
    holdNextPush: async (timeoutMs: number) => {
      await sleep(Math.max(0, Math.min(pushAtMs, timeoutMs) - at()));
      return pushAtMs <= timeoutMs;
    },
  } as unknown as PushReceiver;
  return { runtime, receiver, log, at };
}

describe("the soak's fault driver", () => {
  it("a restart that waits for a push lets a D1 fault end on time, restarts under no call, and holds operator work off until it is over", async () => {
    const { runtime, receiver, log, at } = fakes(600);
    const driver = new FaultDriver(runtime, receiver, new Prng(1));
    const plan: PlannedFault[] = [
      { kind: "restart", at: 0.05 },
      { kind: "d1", worker: "api", shard: "s1", share: 1, at: 0.1, seconds: 0.1 },
    ];
    const operator = sleep(150).then(() => driver.outsideRestarts(async () => void log.push(`operator at ${at()}`)));
    await Promise.all([driver.play(plan, Date.now()), operator]);

    expect(driver.restartsMidBatch).toBe(1);
    const order = log.map((line) => line.replace(/ at \d+$/, ""));
    // On and off before the push came; then the restart, then the faults again, then the operator.
    expect(order).toEqual(['api d1 {"DB_S1":1}', "notifier d1 {}", "api d1 {}", "notifier d1 {}", "restart", "api d1 {}", "notifier d1 {}", "operator"]);
    const d1 = driver.windows.find((window) => window.kind === "d1")!;
    expect(d1.end - d1.start, "the fault lasted as planned, not until the restart").toBeLessThan(400);
  });
});
