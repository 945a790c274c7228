/**
 * Routes every round trip a Worker makes through its storage bindings (each D1 database, KV
 * namespace, queue and R2 bucket) through one function. The storage ledger counts them that way; the soak's
 * wrapper Workers (soak/workers) fail some of them on purpose.
 */
import type { StorageKind } from "../../bench/protocol.ts";

/** Where a round trip goes: the binding's name in env, its kind and the method called. */
export interface StorageCallSite {
  binding: string;
  kind: StorageKind;
  method: string;
}

/**
 * Runs one round trip: `invoke` starts it. Methods known to be round trips reach this before they
 * start, so an implementation may refuse one without it ever reaching the store; any other method
 * that turns out to return a promise reaches it already started.
 */
export type RoundTrip = <T>(site: StorageCallSite, invoke: () => Promise<T>) => Promise<T>;

/** A Worker's bindings with every storage call routed through `roundTrip`; the rest as they were. */
export function routeStorageCalls<Env extends object>(env: Env, roundTrip: RoundTrip): Env {
  const originals = new WeakMap<object, object>();
  const unwrap = (arg: unknown): unknown => {
    if (Array.isArray(arg)) return arg.map(unwrap);
    if (arg !== null && typeof arg === "object") return originals.get(arg) ?? arg;
    return arg;
  };
  // Objects a method hands back (a prepared statement, a bound one, a session) are wrapped in
  // turn, and must reach the runtime unwrapped: D1's batch() reads its statements' internals.
  const wrap = <T extends object>(target: T, site: Omit<StorageCallSite, "method">): T => {
    const proxy = new Proxy(target, {
      get: (object, property) => {
        const value: unknown = Reflect.get(object, property, object);
        if (typeof value !== "function") return value;
        const method = String(property);
        return (...args: unknown[]) => {
          const call = () => value.apply(object, args.map(unwrap)) as unknown;
          if (ROUND_TRIPS[site.kind].has(method)) return roundTrip({ ...site, method }, call as () => Promise<unknown>);
          const result = call();
          if (result instanceof Promise) return roundTrip({ ...site, method }, () => result);
          if (result !== null && typeof result === "object") return wrap(result, site);
          return result;
        };
      },
    });
    originals.set(proxy, target);
    return proxy;
  };
  return Object.fromEntries(
    Object.entries(env).map(([binding, value]) => {
      const kind = storageKind(value);
      return [binding, kind ? wrap(value as object, { binding, kind }) : value];
    }),
  ) as Env;
}

// The methods of each kind of binding (and of the objects D1 hands back) that go to the store.
const ROUND_TRIPS: Record<StorageKind, ReadonlySet<string>> = {
  d1: new Set(["batch", "exec", "dump", "first", "run", "all", "raw"]),
  kv: new Set(["get", "getWithMetadata", "put", "list", "delete"]),
  queue: new Set(["send", "sendBatch"]),
  r2: new Set(["get", "put", "head", "list", "delete"]),
};

// Told apart by a method only that kind of binding has.
function storageKind(binding: unknown): StorageKind | undefined {
  if (binding === null || typeof binding !== "object") return undefined;
  if ("prepare" in binding) return "d1";
  if ("getWithMetadata" in binding) return "kv";
  if ("sendBatch" in binding) return "queue";
  if ("createMultipartUpload" in binding) return "r2";
  return undefined;
}
