/** Drives targets with autocannon and sums up what they saw. */
import { setTimeout as sleep } from "node:timers/promises";
import autocannon from "autocannon";
import { percentile } from "../harness/percentile.ts";

/** One kind of request, sent over and over. */
export interface Target {
  /** Origin of the Worker's socket, e.g. `http://127.0.0.1:41234`. */
  origin: string;
  path: string;
  method: "GET" | "POST";
  headers: Record<string, string>;
  body?: Buffer;
  /** Headers that must differ per request: a fresh Idempotency-Key, the next receipt to delete. */
  perRequest?: () => Record<string, string>;
  /** How many more requests the target can answer as intended, e.g. the receipts left to delete. */
  maxRequests?: () => number;
  /** The status every answer must have for the run to count. */
  expectedStatus: number;
}

/** What one stretch of load saw. */
export interface Sample {
  seconds: number;
  latenciesMs: number[];
  /** Answers other than the expected status, connection errors and timeouts, by kind. */
  failures: Record<string, number>;
}

/** Several samples of one target, summed up. */
export interface Measurement {
  requests: number;
  rps: number;
  p50Ms: number;
  p99Ms: number;
  failures: Record<string, number>;
}

/** Sends requests for `seconds` (or until `maxRequests`) over `connections` keep-alive connections. */
export async function sample(target: Target, connections: number, seconds: number): Promise<Sample> {
  const { perRequest } = target;
  const maxRequests = target.maxRequests?.();
  if (maxRequests !== undefined && maxRequests < connections) {
    return { seconds: 0, latenciesMs: [], failures: { "ran out of prepared requests (seed more)": 1 } };
  }
  const options: autocannon.Options = {
    url: target.origin + target.path,
    method: target.method,
    headers: target.headers,
    connections,
    duration: seconds,
    ...(target.body ? { body: target.body } : {}),
    ...(maxRequests === undefined ? {} : { maxOverallRequests: maxRequests }),
    ...(perRequest
      ? {
          requests: [
            {
              setupRequest: (request) => {
                request.headers = { ...request.headers, ...perRequest() };
                return request;
              },
            },
          ],
        }
      : {}),
  };
  // Every latency is kept, so samples taken apart can be summed up exactly.
  const latenciesMs: number[] = [];
  const result = await new Promise<autocannon.Result>((resolve, reject) => {
    const instance = autocannon(options, (error, done) => (error ? reject(error) : resolve(done)));
    instance.on("response", (_client, _status, _bytes, ms) => void latenciesMs.push(ms));
  });
  // Requests cut off at the end still occupy the runtime; waiting them out keeps them from
  // slowing whatever is measured next.
  const cutOff = result.requests.sent - latenciesMs.length;
  if (cutOff > 0 && latenciesMs.length > 0) {
    await sleep(Math.min(MAX_DRAIN_MS, (cutOff / latenciesMs.length) * result.duration * 1000));
  }
  const failures: Record<string, number> = {};
  for (const [status, { count = 0 }] of Object.entries(result.statusCodeStats ?? {})) {
    if (Number(status) !== target.expectedStatus && count > 0) failures[`status ${status}`] = count;
  }
  // autocannon counts timeouts among the errors.
  if (result.errors > result.timeouts) failures["connection errors"] = result.errors - result.timeouts;
  if (result.timeouts > 0) failures.timeouts = result.timeouts;
  return { seconds: result.duration, latenciesMs, failures };
}

const MAX_DRAIN_MS = 3000;

/** Req/s over the samples' whole time, and percentiles over all their latencies. */
export function summarize(samples: Sample[]): Measurement {
  const latencies = samples.flatMap((one) => one.latenciesMs).sort((a, b) => a - b);
  const seconds = samples.reduce((sum, one) => sum + one.seconds, 0);
  const failures: Record<string, number> = {};
  for (const [kind, count] of samples.flatMap((one) => Object.entries(one.failures))) {
    failures[kind] = (failures[kind] ?? 0) + count;
  }
  return {
    requests: latencies.length,
    rps: seconds > 0 ? latencies.length / seconds : 0,
    p50Ms: percentile(latencies, 0.5),
    p99Ms: percentile(latencies, 0.99),
    failures,
  };
}
