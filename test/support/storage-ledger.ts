/**
 * The one storage-call counter, used by the cost tests and by the bench's counting Worker: it
 * wraps a Worker's storage bindings and records every round trip as `kind.method` (`kv.get`,
 * `d1.batch`, `d1.run`, `queue.send`), and whether the answer waited for it.
 */
import type { StorageCall, StorageKind } from "../../bench/protocol.ts";
import { routeStorageCalls } from "./binding-proxy.ts";

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

  /** A Worker's bindings with every D1 database (each shard), KV namespace and queue counted. */
  instrumentEnv<Env extends object>(env: Env): Env {
    return routeStorageCalls(env, (site, invoke) => this.#track(invoke(), site.kind, site.method));
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
    const settle = async (value?: V) => {
      await scheduler.wait(SETTLE_DELAY_MS);
      const rowsWritten = kind === "d1" ? rowsWrittenBy(value) : undefined;
      this.calls.push({ kind, method, phase: this.answered ? "after" : "response", ...(rowsWritten !== undefined && { rowsWritten }) });
    };
    const tracked = call.then(
      async (value) => (await settle(value), value),
      async (error: unknown) => {
        await settle();
        throw error;
      },
    );
    this.#pending.add(tracked);
    void tracked.finally(() => this.#pending.delete(tracked)).catch(() => undefined);
    return tracked;
  }
}

// What a D1 call wrote: a statement's result, or a batch's results, carry `meta.rows_written`.
function rowsWrittenBy(value: unknown): number | undefined {
  const results = Array.isArray(value) ? value : [value];
  const counts = results.map((result) => (result as { meta?: { rows_written?: number } } | undefined)?.meta?.rows_written);
  return counts.some((count) => count !== undefined) ? counts.reduce<number>((sum, count) => sum + (count ?? 0), 0) : undefined;
}
