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
} as const;

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
