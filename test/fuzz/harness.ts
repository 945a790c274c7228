/**
 * The property-based fuzzing of the three POST routes: runs a campaign of generated requests against one route
 * inside workerd and checks every answer and every log line against docs/api.md. A campaign
 * does not stop at the first broken invariant: it counts them all and reports the first few with
 * the seed that replays them (`FUZZ_SEED=<seed> npm run fuzz`).
 */
import fc from "fast-check";
import { expect, inject, vi } from "vitest";
import { addResponse, deleteResponse, loginResponse } from "../../src/shared/schemas.ts";
import { expectErrorShape, type Answer } from "../support/api.ts";

/**
 * Requests per route: 100 in `npm test`, a smoke of the campaign that keeps the suite fast;
 * `FUZZ_RUNS` (20,000 by default) in `npm run fuzz`, the campaign that finds breaks.
 */
export const FUZZ_RUNS = inject("fuzzRuns");

/**
 * The seconds one route's campaign may send requests for (`FUZZ_SECONDS`): 60 in `npm test`, 600
 * in `npm run fuzz`. A campaign stops there, however many of `FUZZ_RUNS` are left, and says so.
 */
export const FUZZ_SECONDS = inject("fuzzSeconds");

/** A test's time for one campaign: its time bound, and two minutes to set up and check D1. */
export const CAMPAIGN_TIMEOUT_MS = (FUZZ_SECONDS + 120) * 1000;

export type Route = "login" | "add" | "delete";

// docs/api.md#common-rules's status words, written out here rather than imported, so that the Worker cannot
// agree with itself; login's 403 keeps its documented "Not Acceptable".
const STATUS_WORDS: Record<number, string> = {
  400: "Bad Request",
  403: "Forbidden",
  406: "Not Acceptable",
  409: "Conflict",
  413: "Payload Too Large",
  415: "Unsupported Media Type",
  429: "Too Many Requests",
};

// The statuses each route may answer a POST with; anything else, a 5xx above all, is a break.
const STATUSES: Record<Route, number[]> = {
  login: [200, 400, 403, 406, 429],
  add: [200, 400, 403, 406, 409, 413, 415],
  delete: [200, 400, 403, 406],
};

const SUCCESS = { login: loginResponse, add: addResponse, delete: deleteResponse };

/** One generated request as the Worker will receive it. */
export interface FuzzRequest {
  headers: Record<string, string>;
  body?: string | Uint8Array;
}

/** What a campaign's property sees of one request: the answer and the console lines it caused. */
export interface Exchange {
  answer: Answer;
  lines: string[];
}

/**
 * Runs `FUZZ_RUNS` requests drawn from `requests` (fewer if `FUZZ_SECONDS` run out), each through
 * `send`, then `check`. Every answer must keep the documented shape (`expectContractAnswer`) and
 * write exactly one request log line holding none of `secrets()`; `check` adds the route's own
 * model of what must have happened.
 */
export async function runCampaign(
  route: Route,
  requests: fc.Arbitrary<FuzzRequest>,
  send: (request: FuzzRequest) => Promise<Answer>,
  check: (request: FuzzRequest, exchange: Exchange) => Promise<void>,
  secrets: () => string[],
): Promise<void> {
  const seed = inject("fuzzSeed") ?? (Date.now() ^ (Math.random() * 0x7fffffff)) | 0;
  const lines: string[] = [];
  const record = (...args: unknown[]) => void lines.push(args.map(String).join(" "));
  const spies = (["log", "info", "warn", "error", "debug"] as const).map((level) => vi.spyOn(console, level).mockImplementation(record));
  let sent = 0;
  const started = Date.now();
  const statuses: Record<number, number> = {};
  const breaks: string[] = [];
  try {
    await fc.assert(
      fc.asyncProperty(requests, async (request) => {
        const before = lines.length;
        sent += 1;
        try {
          const answer = await send(request);
          statuses[answer.status] = (statuses[answer.status] ?? 0) + 1;
          const exchange = { answer, lines: lines.slice(before) };
          expectContractAnswer(route, answer);
          expectOneCleanLogLine(answer, exchange.lines, secrets());
          await check(request, exchange);
        } catch (error) {
          breaks.push(`${(error as Error).message}\n    request: ${summarise(request)}`);
        }
      }),
      // The bound is checked between requests, so one slow request may overrun it by its own time.
      { numRuns: FUZZ_RUNS, seed, interruptAfterTimeLimit: FUZZ_SECONDS * 1000 },
    );
  } finally {
    for (const spy of spies) spy.mockRestore();
  }
  const seconds = Math.round((Date.now() - started) / 1000);
  const bound = sent < FUZZ_RUNS ? ` (of ${FUZZ_RUNS}: stopped at FUZZ_SECONDS=${FUZZ_SECONDS})` : "";
  console.log(
    `fuzz ${route}: ${sent} requests sent${bound} in ${seconds} s, ${breaks.length} invariant breaks (seed ${seed}; statuses ${JSON.stringify(statuses)})`,
  );
  expect(breaks.slice(0, 5), `${breaks.length} invariant breaks; replay with FUZZ_SEED=${seed}`).toEqual([]);
}

/** docs/api.md#common-rules for any answer of `route`: no 5xx, JSON never cached, and the error shape. */
export function expectContractAnswer(route: Route, answer: Answer): void {
  if (!STATUSES[route].includes(answer.status)) {
    throw new Error(`${route} answered ${answer.status}: ${JSON.stringify(answer.body).slice(0, 300)}`);
  }
  for (const [name, value] of [
    ["content-type", "application/json; charset=utf-8"],
    ["cache-control", "no-store"],
    ["x-content-type-options", "nosniff"],
  ]) {
    if (answer.headers.get(name!) !== value) throw new Error(`${name} is ${answer.headers.get(name!)}`);
  }
  if (answer.status === 200) {
    SUCCESS[route].parse(answer.body);
    return;
  }
  const word = route === "login" && answer.status === 403 ? "Not Acceptable" : STATUS_WORDS[answer.status]!;
  expectErrorShape(answer, answer.status, word);
  if (answer.status === 429 && answer.headers.get("retry-after") !== "60") {
    throw new Error(`429 with Retry-After ${answer.headers.get("retry-after")}`);
  }
}

function expectOneCleanLogLine(answer: Answer, lines: string[], secrets: string[]): void {
  const requestLines = lines.filter((line) => line.startsWith("{") && JSON.parse(line).event === "request");
  if (requestLines.length !== 1) throw new Error(`${requestLines.length} request log lines`);
  if (JSON.parse(requestLines[0]!).status !== answer.status) throw new Error(`log line says ${requestLines[0]}`);
  for (const line of lines) {
    for (const secret of secrets) if (line.includes(secret)) throw new Error(`a log line holds a secret: ${line.slice(0, 200)}`);
  }
}

function summarise(request: FuzzRequest): string {
  const body = request.body instanceof Uint8Array ? `${request.body.byteLength} bytes` : JSON.stringify(request.body?.slice(0, 200));
  const headers = Object.entries(request.headers).map(([name, value]) => `${name}: ${JSON.stringify(value.slice(0, 80))}${value.length > 80 ? `…(${value.length})` : ""}`);
  return `{${headers.join(", ")}} body ${body}`;
}
