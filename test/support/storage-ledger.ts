/**
 * The one storage-call counter, used by the cost tests and by the bench's counting Worker: it
 * wraps a Worker's storage bindings and records every round trip as `kind.method` (`kv.get`,
 * `d1.batch`, `d1.run`, `queue.send`), and whether the answer waited for it.
 */
import type { StorageCall, StorageKind } from "../../bench/protocol.ts";

/**
 * Every call is held back this long before it settles. A call the handler awaited has settled
 * by the time the answer is ready; one it left running (e.g. handed to waitUntil) has not, so it
 * counts as after the response. Calls that overlap an awaited one count as on the response path,
 * which errs on the strict side.
 */
const SETTLE_DELAY_MS = 25;

/** Records storage calls made through the bindings it wraps. */
export class StorageLedger {
  readonly calls: StorageCall[] = [];
  /** Set once the answer is ready: calls settling later count as after the response. */
  answered = false;
  readonly #pending = new Set<Promise<unknown>>();
  // Wrapped objects must reach the runtime unwrapped: D1's batch() reads its statements' internals.
  readonly #originals = new WeakMap<object, object>();

  /** A Worker's bindings with every D1 database (each shard), KV namespace and queue counted. */
  instrumentEnv<Env extends object>(env: Env): Env {
    return Object.fromEntries(
      Object.entries(env).map(([name, binding]) => {
        const kind = storageKind(binding);
        return [name, kind ? this.instrument(binding as object, kind) : binding];
      }),
    ) as Env;
  }

  /**
   * Wraps a binding so that every method returning a promise counts as one round trip, and every
   * method returning an object (a prepared statement, a bound one, a session) is wrapped in turn.
   */
  instrument<T extends object>(target: T, kind: StorageKind): T {
    const proxy = new Proxy(target, {
      get: (object, property) => {
        const value: unknown = Reflect.get(object, property, object);
        if (typeof value !== "function") return value;
        return (...args: unknown[]) => {
          const result: unknown = value.apply(object, args.map((arg) => this.#unwrap(arg)));
          if (result instanceof Promise) return this.#track(result, kind, String(property));
          if (result !== null && typeof result === "object") return this.instrument(result, kind);
          return result;
        };
      },
    });
    this.#originals.set(proxy, target);
    return proxy;
  }

  /** Waits for calls still in flight, so the ledger is complete. */
  async drain(): Promise<void> {
    while (this.#pending.size > 0) await Promise.allSettled([...this.#pending]);
  }

  /** The calls as `kind.method` in the order they settled: all of them, or those of one phase. */
  names(phase?: StorageCall["phase"]): string[] {
    return this.calls.filter((call) => !phase || call.phase === phase).map(({ kind, method }) => `${kind}.${method}`);
  }

  #track<V>(call: Promise<V>, kind: StorageKind, method: string): Promise<V> {
    const settle = async () => {
      await scheduler.wait(SETTLE_DELAY_MS);
      this.calls.push({ kind, method, phase: this.answered ? "after" : "response" });
    };
    const tracked = call.then(
      async (value) => (await settle(), value),
      async (error: unknown) => {
        await settle();
        throw error;
      },
    );
    this.#pending.add(tracked);
    void tracked.finally(() => this.#pending.delete(tracked)).catch(() => undefined);
    return tracked;
  }

  #unwrap(arg: unknown): unknown {
    if (Array.isArray(arg)) return arg.map((item) => this.#unwrap(item));
    if (arg !== null && typeof arg === "object") return this.#originals.get(arg) ?? arg;
    return arg;
  }
}

// Told apart by a method only that kind of binding has.
function storageKind(binding: unknown): StorageKind | undefined {
  if (binding === null || typeof binding !== "object") return undefined;
  if ("prepare" in binding) return "d1";
  if ("getWithMetadata" in binding) return "kv";
  if ("sendBatch" in binding) return "queue";
  return undefined;
}
