/**
 * The counting Worker: runs the API Worker's own code for one request with its storage bindings
 * wrapped, and answers with every storage call it made and whether the answer waited for it.
 * Used once per route, apart from the timed runs, so that counting costs the timings nothing.
 *
 * Never deployed: bench/run.ts bundles it with `wrangler deploy --dry-run` and gives it the API
 * Worker's bindings. Each counted request should name a client this Worker has not seen, so the
 * per-isolate client cache cannot hide the KV read a cold isolate makes.
 */
import api from "../../src/api/index.ts";
import type { ApiEnv } from "../../src/shared/env.ts";
import type { CountedAnswer, StorageCall, StorageKind } from "../protocol.ts";

/**
 * Every call is held back this long before it settles. A call the handler awaited has settled
 * by the time the answer is ready; one it left running (e.g. handed to waitUntil) has not, so it
 * counts as after the response. Calls that overlap an awaited one count as on the response path,
 * which errs on the strict side.
 */
const SETTLE_DELAY_MS = 25;

export default {
  async fetch(request, env, ctx): Promise<Response> {
    const ledger = new Ledger();
    const deferred: Promise<unknown>[] = [];
    const countedEnv: ApiEnv = {
      ...env,
      DB: ledger.instrument(env.DB, "d1"),
      CLIENTS: ledger.instrument(env.CLIENTS, "kv"),
      NOTICES: ledger.instrument(env.NOTICES, "queue"),
    };
    const countedCtx = new Proxy(ctx, {
      get: (target, property) => {
        if (property === "waitUntil") return (promise: Promise<unknown>) => void deferred.push(promise);
        const value: unknown = Reflect.get(target, property, target);
        return typeof value === "function" ? value.bind(target) : value;
      },
    });
    const response = await api.fetch(request, countedEnv, countedCtx);
    const body = await response.text();
    ledger.answered = true;
    await Promise.allSettled(deferred);
    await ledger.drain();
    const answer: CountedAnswer = { status: response.status, body, calls: ledger.calls };
    return Response.json(answer);
  },
} satisfies ExportedHandler<ApiEnv>;

/** Records storage calls made through the bindings it wraps. */
class Ledger {
  readonly calls: StorageCall[] = [];
  answered = false;
  readonly #pending = new Set<Promise<unknown>>();
  // Wrapped objects must reach the runtime unwrapped: D1's batch() reads its statements' internals.
  readonly #originals = new WeakMap<object, object>();

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
