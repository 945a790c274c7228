/**
 * What the soak's Node driver and its wrapper Workers agree on. Free of runtime-specific types,
 * so both the Workers build and the Node typecheck can import it.
 */

/** The name under which a wrapper Worker finds the deployed bundle it runs, beside itself. */
export const DEPLOYED_MODULE = "deployed.js";

/** The path on each wrapper Worker that sets its faults (POST) and reports what it injected (GET). */
export const FAULTS_PATH = "/__soak/faults";

/**
 * The path on the API wrapper that runs an erasure's Workflow instance: POST `{"app_user_id"}`
 * starts one and answers `{"id"}`; GET `?id=<id>` answers its status (`{"status", "output",
 * "error"}`), as `npm run app-users -- erase` reads them through wrangler.
 */
export const ERASE_PATH = "/__soak/erase";

/**
 * The path on the API wrapper that runs the archive's move on one shard: POST `{"shard"}` starts
 * an instance and answers `{"id"}`; GET `?id=<id>` answers its status, as on ERASE_PATH.
 */
export const ARCHIVE_PATH = "/__soak/archive";

/** What a wrapper Worker fails, from the moment it is told until it is told otherwise. */
export interface BindingFaults {
  /** Seeds the wrapper's draws of which calls fail. */
  seed: number;
  /** Share of the calls to each D1 binding (`DB_S1`...) that fail; absent means none. */
  d1: Record<string, number>;
  /** Share of queue sends that fail. */
  queue: number;
  /** Share of R2 calls (the archive's bucket) that fail; absent means none. */
  r2?: number;
}

/** No faults at all. */
export const HEALTHY: BindingFaults = { seed: 0, d1: {}, queue: 0 };

/**
 * Calls a wrapper failed since it started, by `<kind> <when>`: `d1 before` (the call never
 * reached the store), `d1 after` (it did, and its answer was lost), and the same for `queue` and `r2`.
 */
export type InjectedCalls = Record<string, number>;

/** What every failure the wrapper injects says, apart from D1's own transient message. */
export const INJECTED_MARK = "soak: ";

/** The message D1 documents as transient (src/storage/transient.ts): the service retries it. */
export const TRANSIENT_D1_MESSAGE = "D1_ERROR: Network connection lost.";

/**
 * The path on the API wrapper that holds the Workflows' steps at a gate, so that a test can send
 * requests racing an erasure between any two of its steps: POST `{"hold": true|false}` turns the
 * gates on or off (off releases every held step), POST `{"release": <key>}` lets one held step
 * run; GET answers `{"held": [<key>...]}`, a key being `<instance id> <step name>`. Off unless told.
 */
export const STEPS_PATH = "/__soak/steps";

/**
 * The path on the API wrapper that makes one R2 call naming the POSTed `{"value"}` (a head of it
 * as a key): a span that holds a value on purpose, so that a test shows the erasure scans read the
 * trace store.
 */
export const SPAN_PATH = "/__soak/span";

/**
 * The path on the API wrapper that runs SQL on one shard for the harness, over HTTP rather than
 * through Miniflare's binding proxies: POST `{"binding", "statements": [{"sql", "params"}]}` runs
 * the statements as one batch on the binding as deployed (no faults) and answers a
 * {@link SqlResult} each. A proxy's call (a D1 prepare, bind or first query) blocks Node's thread
 * until workerd answers, while workerd, logging a burst of deliveries, blocks on the output pipe
 * that only that thread reads: the soak once hung so, for good, in its drain.
 */
export const SQL_PATH = "/__soak/sql";

/** One statement's rows and the rows it changed; a BLOB comes as an array of its bytes. */
export interface SqlResult {
  results: Record<string, unknown>[];
  changes: number;
}
