/**
 * What the bench's Node driver and its two helper Workers agree on. Free of runtime-specific
 * types, so both the Workers build and the Node typecheck can import it.
 */

/** The floor Worker's routes, one per operation (see bench/workers/floor.ts). */
export const FLOOR_PATHS = {
  trivial: "/floor/trivial",
  login: "/floor/login",
  add: "/floor/add",
  delete: "/floor/delete",
  deflate: "/floor/deflate",
} as const;

/**
 * The ways to deflate a body that the floor Worker can time (header `deflate-with`): `stream`,
 * add's own (src/storage/deflate.ts: the runtime's CompressionStream, written and read directly);
 * `response`, the same stream piped through a Blob into a Response.
 */
export const DEFLATES = ["stream", "response"] as const;
export type Deflate = (typeof DEFLATES)[number];

/** Storage bindings the counting Worker instruments. */
export type StorageKind = "kv" | "d1" | "queue" | "r2";

/** One storage call seen by the counting Worker. */
export interface StorageCall {
  kind: StorageKind;
  /** The binding method, e.g. `get`, `batch`, `first`, `send`. */
  method: string;
  /** `response`: the answer waited for it; `after`: it finished after the answer was ready. */
  phase: "response" | "after";
  /** A D1 call's rows written as D1 reports them (`meta.rows_written`, each index entry a row), summed over a batch. */
  rowsWritten?: number;
}

/** What the counting Worker answers for one request it passed to the API Worker's code. */
export interface CountedAnswer {
  status: number;
  body: string;
  calls: StorageCall[];
}
