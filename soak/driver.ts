/**
 * Plays the fault plan against the running soak: tells the wrapper Workers which storage calls to
 * fail, the receiver when to be down, KV when a shard is closed, and restarts the runtime while
 * the notifier is mid-batch; records each fault as it really happened, for the reconciliation.
 */
import { setTimeout as sleep } from "node:timers/promises";
import { faultEnd, type PlannedFault, type TimedFault } from "./plan.ts";
import type { Prng } from "./prng.ts";
import { HEALTHY, type BindingFaults } from "./protocol.ts";
import type { FaultWindow } from "./reconcile.ts";
import type { PushReceiver } from "./receiver.ts";
import type { SoakRuntime, SoakShard, WrappedWorker } from "./runtime.ts";

/**
 * How long a restart waits for a push to hold, so that it cuts the notifier off mid-batch: long
 * enough to outlast a stretch with no push at all, as while the push service is marked down and
 * the home shard's D1 fails (its probe slot unread), which one run met for 9.5 s.
 */
const MID_BATCH_WAIT_MS = 30_000;

type FaultKind = TimedFault["kind"];
type FaultOf<K extends FaultKind> = Extract<TimedFault, { kind: K }>;

/** What turning one kind of timed fault on and off does, and what its window records beyond the times. */
interface FaultEffect<F extends TimedFault> {
  on(fault: F): Promise<void> | void;
  /** Runs once `fault` is no longer active; another fault of its kind may still be. */
  off(fault: F): Promise<void> | void;
  where?(fault: F): Pick<FaultWindow, "worker" | "shard">;
  /**
   * Resolves once `fault` struck at least once; where given, a window that met nothing to strike
   * lasts until it does (or the load ends): a fault that never struck proved nothing.
   */
  struck?(fault: F): Promise<void>;
}

/** How often a fault that has not struck yet looks again at what the wrappers injected. */
const STRUCK_POLL_MS = 250;

export class FaultDriver {
  readonly windows: FaultWindow[] = [];
  /** Restarts that caught the notifier with a push in flight. */
  restartsMidBatch = 0;
  readonly #runtime: SoakRuntime;
  readonly #receiver: PushReceiver;
  readonly #prng: Prng;
  readonly #shards: readonly SoakShard[];
  readonly #active = new Set<TimedFault>();
  readonly #started = new Map<TimedFault, number>();
  /** Of each fault that must strike before it ends, whether it has. */
  readonly #struck = new Map<TimedFault, Promise<boolean>>();
  /** What the wrapper had injected of a D1 fault's kind when the fault began. */
  readonly #injectedBefore = new Map<TimedFault, number>();
  /** Settles once no restart is under way: until then nothing calls the runtime. */
  #restarting: Promise<void> = Promise.resolve();
  /** Settles once no restart is due: a restart waiting for a push holds new operator work off. */
  #restartDue: Promise<void> = Promise.resolve();
  /** Operator work on the storage under way (see `outsideRestarts`). */
  readonly #operatorWork = new Set<Promise<unknown>>();
  /** The driver's own calls on the runtime under way (see `#call`), which a restart waits out. */
  readonly #calls = new Set<Promise<unknown>>();
  // One row per kind of timed fault. Binding faults are recomputed from every fault still active,
  // so ending one is the same call as starting it; an outage lasts while any outage is on.
  readonly #effects: { [K in FaultKind]: FaultEffect<FaultOf<K>> } = {
    d1: {
      on: () => this.#applyBindingFaults(),
      off: () => this.#applyBindingFaults(),
      where: ({ worker, shard }) => ({ worker, shard }),
      // The notifier makes few D1 calls, and none while restarting or holding pushes back.
      struck: (fault) => (fault.worker === "notifier" ? this.#injectedSince(fault, "notifier", "d1") : Promise.resolve()),
    },
    queue: { on: () => this.#applyBindingFaults(), off: () => this.#applyBindingFaults() },
    "push outage": { on: () => this.#receiver.setOutage(true), off: () => this.#receiver.setOutage(this.#anyActive("push outage")) },
    "push refused": {
      on: () => this.#receiver.setRefusing(true),
      off: () => this.#receiver.setRefusing(this.#anyActive("push refused")),
      // No push comes while the notifier restarts, is cut off from D1, or probes a push service marked down.
      struck: (fault) => this.#receiver.refusedSince(this.#started.get(fault)!),
    },
    "shard closed": {
      on: ({ shard }) => this.#runtime.setShardState(shard, "closed"),
      off: ({ shard }) => this.#runtime.setShardState(shard, "open"),
      where: ({ shard }) => ({ shard }),
    },
  };

  constructor(runtime: SoakRuntime, receiver: PushReceiver, prng: Prng) {
    this.#runtime = runtime;
    this.#receiver = receiver;
    this.#prng = prng;
    this.#shards = runtime.shards;
  }

  /** Plays `plan` from `startedAt` (ms since the epoch); returns once its last fault is over. */
  async play(plan: readonly PlannedFault[], startedAt: number): Promise<void> {
    // A restart waits for the operator's erasure under way; the faults after it keep their times
    // rather than wait with it, else a window whose start and end both fell behind would shrink to
    // nothing. Restarts still run one after the other.
    let restarts = Promise.resolve();
    const steps = plan.flatMap((fault) =>
      fault.kind === "restart"
        ? [{ at: fault.at, run: (): void => void (restarts = restarts.then(() => this.#restart())) }]
        : [
            { at: fault.at, run: () => this.#begin(fault) },
            { at: faultEnd(fault), run: () => this.#end(fault) },
          ],
    );
    steps.sort((a, b) => a.at - b.at);
    for (const step of steps) {
      await sleep(Math.max(0, startedAt + step.at * 1000 - Date.now()));
      await step.run();
    }
    await restarts;
  }

  /** Resolves when no restart is under way: the runtime can be called. */
  idle(): Promise<void> {
    return this.#restarting;
  }

  /**
   * Runs an operator's work on the storage (an erasure) with no restart under way, and holds the
   * next restart off until it ends. In production such work goes through D1's API, which a
   * Workers restart never touches; here it shares the one runtime, and a restart under its calls
   * would leave them hanging.
   */
  async outsideRestarts<T>(work: () => Promise<T>): Promise<T> {
    return this.#outside(work, this.#operatorWork, true);
  }

  /** Ends every fault still on, struck or not. */
  async heal(): Promise<void> {
    for (const fault of [...this.#active]) await this.#end(fault, true);
  }

  async #begin(fault: TimedFault): Promise<void> {
    if (fault.kind === "d1" && fault.worker === "notifier") this.#injectedBefore.set(fault, await this.#injected("notifier", "d1"));
    const effect = this.#effectOf(fault.kind);
    await this.#call(async () => {
      this.#active.add(fault);
      this.#started.set(fault, Date.now());
      await effect.on(fault);
    });
    if (effect.struck) this.#struck.set(fault, effect.struck(fault).then(() => true));
  }

  async #end(fault: TimedFault, healing = false): Promise<void> {
    if (!this.#active.has(fault)) return;
    const struck = this.#struck.get(fault);
    if (struck && !healing && !(await Promise.race([struck, false]))) {
      void struck.then(() => this.#end(fault, true));
      return;
    }
    this.#active.delete(fault);
    const effect = this.#effectOf(fault.kind);
    await this.#call(async () => {
      this.windows.push({ kind: fault.kind, start: this.#started.get(fault)!, end: Date.now(), ...effect.where?.(fault) });
      await effect.off(fault);
    });
  }

  /** Runs the driver's own `work` on the runtime with no restart under way. */
  #call<T>(work: () => Promise<T>): Promise<T> {
    return this.#outside(work, this.#calls, false);
  }

  /**
   * Runs `work` once no restart is under way (nor, with `dueToo`, due), kept in `running` while it
   * runs: the check and the start are one synchronous step, so a restart that begins later finds
   * it among the work it waits out.
   */
  async #outside<T>(work: () => Promise<T>, running: Set<Promise<unknown>>, dueToo: boolean): Promise<T> {
    for (;;) {
      const [due, restarting] = [this.#restartDue, this.#restarting];
      await Promise.all([dueToo ? due : undefined, restarting]);
      if ((!dueToo || due === this.#restartDue) && restarting === this.#restarting) break;
    }
    const started = work();
    running.add(started);
    try {
      return await started;
    } finally {
      running.delete(started);
    }
  }

  #effectOf<K extends FaultKind>(kind: K): FaultEffect<FaultOf<K>> {
    return this.#effects[kind];
  }

  /** Resolves once the wrapper of `worker` injected a call of `kind` since `fault` began, or `fault` ended. */
  async #injectedSince(fault: TimedFault, worker: WrappedWorker, kind: string): Promise<void> {
    const before = this.#injectedBefore.get(fault) ?? 0;
    while (this.#active.has(fault)) {
      if ((await this.#injected(worker, kind).catch(() => before)) > before) return;
      await sleep(STRUCK_POLL_MS);
    }
  }

  // A failed read is read again, a few times.
  async #injected(worker: WrappedWorker, kind: string): Promise<number> {
    for (let attempt = 1; ; attempt += 1) {
      try {
        const counts = (await this.#call(() => this.#runtime.injected()))[worker];
        return (counts[`${kind} before`] ?? 0) + (counts[`${kind} after`] ?? 0);
      } catch (error) {
        if (attempt >= 10) throw error;
      }
      await sleep(STRUCK_POLL_MS);
    }
  }

  #anyActive(kind: FaultKind): boolean {
    return [...this.#active].some((fault) => fault.kind === kind);
  }

  async #restart(): Promise<void> {
    // No operator work begins from here on; the work under way ends first, the faults going on
    // meanwhile, and so they do while the restart waits for a push to hold (a while, when the
    // push service is marked down and a D1 fault holds its probes back).
    let due!: () => void;
    this.#restartDue = new Promise<void>((resolve) => (due = resolve));
    try {
      while (this.#operatorWork.size > 0) await Promise.allSettled([...this.#operatorWork]);
      if (await this.#receiver.holdNextPush(MID_BATCH_WAIT_MS)) this.restartsMidBatch += 1;
      const start = Date.now();
      // Nothing calls the runtime from here on; the driver's calls under way end first.
      this.#restarting = (async () => {
        await Promise.allSettled([...this.#calls]);
        await this.#runtime.restart();
        // A restarted wrapper has forgotten its faults.
        await this.#applyBindingFaults();
      })();
      await this.#restarting;
      this.windows.push({ kind: "restart", start, end: Date.now() });
    } finally {
      due();
    }
  }

  async #applyBindingFaults(): Promise<void> {
    for (const worker of ["api", "notifier"] as const) await this.#runtime.setFaults(worker, this.#faultsOf(worker));
  }

  #faultsOf(worker: WrappedWorker): BindingFaults {
    const faults: BindingFaults = { ...HEALTHY, d1: {}, seed: this.#prng.int(1, 2 ** 31) };
    for (const fault of this.#active) {
      if (fault.kind === "d1" && fault.worker === worker) {
        const binding = this.#shards.find((shard) => shard.name === fault.shard)!.binding;
        faults.d1[binding] = Math.max(faults.d1[binding] ?? 0, fault.share);
      } else if (fault.kind === "queue" && worker === "api") faults.queue = Math.max(faults.queue, fault.share);
    }
    return faults;
  }
}
