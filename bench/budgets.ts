/**
 * Storage-call budgets: each operation may make at most these calls on its response
 * path. Calls after the answer (waitUntil) are counted and shown, not limited: they cost the
 * platform, not the till's wait.
 */
import type { CountedAnswer, StorageCall, StorageKind } from "./protocol.ts";

/** Operations whose calls are counted. */
export type Operation = "trivial" | "login" | "add" | "delete";

/** Most KV and D1 round trips on the response path; queue sends are not limited. */
export const BUDGETS: Record<Operation, Partial<Record<StorageKind, number>>> = {
  trivial: { kv: 0, d1: 0 },
  login: { kv: 1, d1: 0 },
  add: { kv: 1, d1: 1 },
  delete: { kv: 1, d1: 2 },
};

/** One request as the counting Worker should pass it to the API Worker's code. */
export interface CountedRequest {
  path: string;
  headers: Record<string, string>;
  body?: string;
  expectedStatus: number;
}

/** The calls one operation made, and what is wrong with them. */
export interface CallCount {
  operation: Operation;
  calls: StorageCall[];
  /** Empty when the operation answered as expected within its budget. */
  problems: string[];
}

/** Sends one request through the counting Worker and checks it against its budget. */
export async function countCalls(countedOrigin: string, operation: Operation, request: CountedRequest): Promise<CallCount> {
  const response = await fetch(countedOrigin + request.path, {
    method: "POST",
    headers: request.headers,
    ...(request.body === undefined ? {} : { body: request.body }),
  });
  const answer = (await response.json()) as CountedAnswer;
  const problems: string[] = [];
  if (answer.status !== request.expectedStatus) {
    problems.push(`answered ${answer.status}, expected ${request.expectedStatus}: ${answer.body.slice(0, 300)}`);
  }
  for (const [kind, limit] of Object.entries(BUDGETS[operation]) as [StorageKind, number][]) {
    const used = answer.calls.filter((call) => call.kind === kind && call.phase === "response").length;
    if (used > limit) problems.push(`${used} ${kind} calls on the response path, budget ${limit}`);
  }
  return { operation, calls: answer.calls, problems };
}

/** `response: kv.get, d1.batch; after: queue.send; D1 rows written 7`, in call order. */
export function describeCalls(calls: StorageCall[]): string {
  const phase = (name: StorageCall["phase"]) =>
    calls.filter((call) => call.phase === name).map((call) => `${call.kind}.${call.method}`).join(", ") || "none";
  return `response: ${phase("response")}; after: ${phase("after")}; D1 rows written ${rowsWritten(calls)}`;
}

/** The rows the calls wrote, as D1 counts them for its bill (each index entry a row). */
export function rowsWritten(calls: StorageCall[]): number {
  return calls.reduce((sum, call) => sum + (call.rowsWritten ?? 0), 0);
}
