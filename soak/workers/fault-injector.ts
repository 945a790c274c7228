/**
 * Fails storage calls of a wrapped Worker on the harness's say-so, through the same binding proxy
 * the storage ledger counts with. A failed call either never reaches the store or reaches it and
 * loses its answer, as a dropped connection does; half of the D1 failures carry a message D1
 * documents as transient, which the service retries (src/storage/transient.ts).
 */
import { routeStorageCalls, type StorageCallSite } from "../../test/support/binding-proxy.ts";
import { Prng } from "../prng.ts";
import { FAULTS_PATH, HEALTHY, INJECTED_MARK, TRANSIENT_D1_MESSAGE, type BindingFaults, type InjectedCalls } from "../protocol.ts";

/** Share of failed calls that reached the store first. */
const AFTER_SHARE = 0.3;
const TRANSIENT_SHARE = 0.5;

/** One per wrapper Worker isolate: its faults and its count of what it injected. */
export class FaultInjector {
  #faults: BindingFaults = HEALTHY;
  #prng = new Prng(HEALTHY.seed);
  readonly #injected: InjectedCalls = {};
  // One wrapped env per env: the Workers cache their parsed settings and shard list per env object.
  readonly #wrapped = new WeakMap<object, object>();

  /** Answers the harness on FAULTS_PATH: POST sets the faults, GET reports the injected calls. */
  async control(request: Request): Promise<Response> {
    if (new URL(request.url).pathname !== FAULTS_PATH) return new Response(null, { status: 404 });
    if (request.method === "POST") {
      this.#faults = (await request.json()) as BindingFaults;
      this.#prng = new Prng(this.#faults.seed);
    }
    return Response.json(this.#injected);
  }

  wrap<Env extends object>(env: Env): Env {
    let wrapped = this.#wrapped.get(env) as Env | undefined;
    if (!wrapped) {
      wrapped = routeStorageCalls(env, (site, invoke) => this.#roundTrip(site, invoke));
      this.#wrapped.set(env, wrapped);
    }
    return wrapped;
  }

  #roundTrip<T>(site: StorageCallSite, invoke: () => Promise<T>): Promise<T> {
    const share =
      site.kind === "d1" ? (this.#faults.d1[site.binding] ?? 0) : site.kind === "queue" ? this.#faults.queue : site.kind === "r2" ? (this.#faults.r2 ?? 0) : 0;
    if (share === 0 || !this.#prng.chance(share)) return invoke();
    const after = this.#prng.chance(AFTER_SHARE);
    const label = `${site.kind} ${after ? "after" : "before"}`;
    this.#injected[label] = (this.#injected[label] ?? 0) + 1;
    const error = new Error(this.#message(site));
    return after ? invoke().then(() => Promise.reject(error)) : Promise.reject(error);
  }

  #message(site: StorageCallSite): string {
    if (site.kind !== "d1") return `${INJECTED_MARK}${site.binding}.${site.method} failed`;
    return this.#prng.chance(TRANSIENT_SHARE) ? TRANSIENT_D1_MESSAGE : `D1_ERROR: ${INJECTED_MARK}${site.binding} is unavailable`;
  }
}
