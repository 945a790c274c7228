/**
 * `npm run bench`: builds both Workers, runs them under Miniflare beside the floor
 * Worker, counts each operation's storage calls against its budget, then times every route and
 * its floor with autocannon over loopback. Prints the table, writes bench/results.json, and
 * exits 1 when a bundle is too large, a budget is exceeded or a route answers wrongly.
 */
import { writeFileSync } from "node:fs";
import path from "node:path";
import { UsageError, parse, positiveInteger, runCli } from "../scripts/lib/cli.ts";
import { PATHS } from "../src/shared/paths.ts";
import { drRetailContentType } from "../src/shared/dr-retail-profiles.ts";
import { drRetailReceipt, receiptBody } from "../harness/bodies.ts";
import type { HarnessClient } from "../harness/miniflare.ts";
import { formatTable } from "../harness/table.ts";
import { countCalls, describeCalls, rowsWritten, type CountedRequest, type Operation } from "./budgets.ts";
import { buildAll, bundleSizes, type Bundles } from "./build.ts";
import { benchNotifier, type NotifierResult } from "./notifier.ts";
import { sample, summarize, type Measurement, type Sample, type Target } from "./load.ts";
import { DEFLATES, FLOOR_PATHS, type Deflate } from "./protocol.ts";
import { deflateMs } from "./deflate.ts";
import { APP_USER, addHeaders, logIn, loginHeaders, tokenHeaders } from "./requests.ts";
import { startRuntime, type Runtime } from "./runtime.ts";
import { benchTillToApp, type TillToAppRow } from "./till-to-app.ts";

const ROUTES = ["trivial", "login", "add-2k", "add-40k", "add-dr", "delete"] as const;
type RouteName = (typeof ROUTES)[number];
const NOTIFIER = "notifier";
const TILL_TO_APP = "till-to-app";
/**
 * The till-to-app rates: a steady 20 adds a second, and the peak of a 1,000-store chain (docs/scale.md
 * §12: 0.058 a store). Its goal: the push's p99 at most this long after the till's answer.
 */
const TILL_TO_APP_RATES = [20, 58];
const TILL_TO_APP_TARGET_P99_MS = 250;
/**
 * The notifier's runs: events it and its floor each deliver, in turns. With the receiver answering
 * at once (the goal's run), several seconds at local speed; with it answering after a push
 * service's few milliseconds, about as long with fewer events.
 */
const NOTIFIER_RUNS = [
  { events: 10_000, pushDelayMs: 0 },
  { events: 2_000, pushDelayMs: 5 },
];
const NOTIFIER_TARGET_RATIO = 0.85;

const OPERATION: Record<RouteName, Operation> = {
  trivial: "trivial",
  login: "login",
  "add-2k": "add",
  "add-40k": "add",
  "add-dr": "add",
  delete: "delete",
};

/** The routes' goals: req/s at least this share of the floor's, p99 at most 1.5 times its. */
const TARGET_RATIO: Partial<Record<RouteName, number>> = { trivial: 0.5, login: 0.9, "add-2k": 0.85, "add-40k": 0.6, delete: 1 };
const TARGET_P99_RATIO = 1.5;
/** add-dr's goal: its ratio within this of add-2k's in the same run (the same add, read as DR Retail and mapped). */
const DR_GOAL_BELOW_ADD_2K = 0.1;

const USAGE = `Usage: npm run bench [-- [--seconds <n>] [--connections <n>] [--only <route>,...]]

  --seconds <n>       timed seconds per route and per floor, taken in 5 turns (default 30)
  --connections <n>   keep-alive connections per run (default 50)
  --only <routes>     comma-separated, among: ${ROUTES.join(", ")}, ${NOTIFIER}, ${TILL_TO_APP} (default all)`;

const KIB = 1024;
const WARMUP_SECONDS = 1;
/**
 * A route and its floor take turns this many times, so a burst of other work falls on both. The
 * p99 ratio is the median of the turns' own ratios: a burst that lands on one turn moves one of
 * five, where over three turns pooled it moved add-2k's by ±0.4 between runs.
 */
const ROUNDS = 5;
/**
 * Receipts seeded per side for delete: enough for this rate over warm-up and timed run, about
 * four times what delete reaches today. A faster delete runs out and fails the run: raise it.
 */
const DELETE_RPS_CEILING = 1500;
const RESULTS_FILE = path.join(import.meta.dirname, "results.json");
// Not an operation: the API Worker's cheapest answer (routing, config, error model, log line).
const API_TRIVIAL = "/receipts/v2/trivial";

/** One route's timings beside its floor's, as written to bench/results.json. */
interface ResultRow {
  route: RouteName;
  rps: number;
  p50_ms: number;
  p99_ms: number;
  floor_rps: number;
  floor_p99_ms: number;
  ratio: number;
  /** The median of the turns' p99 ratios. */
  p99_ratio: number;
  /** The lowest and highest of the turns' p99 ratios. */
  p99_ratio_turns: [number, number];
}

/** Load settings; the same for every target of a run. */
interface LoadSettings {
  connections: number;
  /** Timed seconds per target, split over the rounds. */
  seconds: number;
}

/** What every route's targets are made from. */
interface Bench {
  runtime: Runtime;
  client: HarnessClient;
  token: string;
  settings: LoadSettings;
}

await runCli(USAGE, async (argv) => {
  const started = Date.now();
  const { values, positionals } = parse(argv, {
    seconds: { type: "string", default: "30" },
    connections: { type: "string", default: "50" },
    only: { type: "string" },
  });
  if (positionals.length > 0) throw new UsageError(`Unexpected argument: ${positionals[0]}`);
  const settings: LoadSettings = {
    seconds: positiveInteger("--seconds", values.seconds),
    connections: positiveInteger("--connections", values.connections),
  };
  const selected = selectRoutes(values.only);
  const failures: string[] = [];

  const bundles = buildAll();
  console.log(`Built in ${secondsSince(started)} s.`);
  for (const { worker, gzipBytes, limitBytes } of bundleSizes(bundles)) {
    console.log(`  ${worker} Worker: ${kib(gzipBytes)} KiB gzip (limit ${kib(limitBytes)} KiB)`);
    if (gzipBytes > limitBytes) failures.push(`${worker} Worker is ${kib(gzipBytes)} KiB gzip, over ${kib(limitBytes)} KiB`);
  }

  const runtime = await startRuntime(bundles);
  console.log(`Miniflare ready at ${secondsSince(started)} s.`);
  try {
    const client = await runtime.issueClient("load");
    const bench: Bench = { runtime, client, token: await logIn(runtime, client), settings };

    console.log("\nStorage calls per operation (one request each, through the counting Worker):");
    // The budgets are a warm isolate's: its first add reads the shard states, which it then
    // reuses for a minute. That read is made here, before anything is counted.
    await countCalls(runtime.urls.counted, "add", await countedRequest("add", runtime));
    const rowsWrittenBy: Partial<Record<Operation, number>> = {};
    for (const operation of new Set(selected.map((route) => OPERATION[route]))) {
      const count = await countCalls(runtime.urls.counted, operation, await countedRequest(operation, runtime));
      console.log(`  ${operation.padEnd(8)} ${describeCalls(count.calls)}`);
      rowsWrittenBy[operation] = rowsWritten(count.calls);
      failures.push(...count.problems.map((problem) => `${operation}: ${problem}`));
    }

    console.log("\nDeflate per add, CPU in workerd (add's body before its batch; the floor stores it so too):");
    const deflates: Record<string, Record<Deflate, number>> = {};
    for (const [size, body] of [["2 KB", receiptBody(2 * KIB)], ["40 KB", receiptBody(40 * KIB)]] as const) {
      const row = {} as Record<Deflate, number>;
      for (const deflateWith of DEFLATES) row[deflateWith] = await deflateMs(runtime.urls.floor, body, deflateWith);
      deflates[size] = row;
      console.log(`  ${size.padEnd(6)} ${DEFLATES.map((name) => `${name} ${row[name].toFixed(3)} ms`).join(", ")}`);
    }
    console.log(`  add deflates with "stream" (src/storage/deflate.ts)`);

    console.log(
      `\nTiming (${settings.connections} connections; ${WARMUP_SECONDS} s warm-up, then ${settings.seconds} s ` +
        `per target in ${ROUNDS} turns with its floor):`,
    );
    const rows: ResultRow[] = [];
    for (const route of selected) {
      const targets = await targetsFor(route, bench);
      const [routeRun, floorRun, p99Ratios] = await compare(targets.api, targets.floor, settings);
      failures.push(...describeFailures(route, routeRun), ...describeFailures(`${route} floor`, floorRun));
      rows.push(resultRow(route, routeRun, floorRun, p99Ratios));
      console.log(`  ${route.padEnd(8)} ${Math.round(routeRun.rps)} req/s, floor ${Math.round(floorRun.rps)} req/s`);
    }
    printTable(rows, rowsWrittenBy);
    const notifierRow = withTarget(values.only, NOTIFIER) ? await notifierTarget(bundles) : undefined;
    const tillRows = withTarget(values.only, TILL_TO_APP) ? await tillToAppTarget(bundles, settings.seconds) : undefined;
    writeFileSync(
      RESULTS_FILE,
      `${JSON.stringify({ routes: rows, d1_rows_written: rowsWrittenBy, deflate_ms: deflates, notifier: notifierRow, till_to_app: tillRows }, null, 2)}\n`,
    );
    console.log(`Wrote ${path.relative(process.cwd(), RESULTS_FILE)}.`);
    if (failures.length > 0) {
      const problems = runtime.recentProblems();
      if (problems.length > 0) console.error(`\nLast warnings and errors the Workers logged:\n  ${problems.join("\n  ")}`);
    }
  } finally {
    await runtime.dispose();
  }
  console.log(`Finished in ${secondsSince(started)} s.`);
  if (failures.length > 0) throw new Error(`\nBENCH FAILED:\n  ${failures.join("\n  ")}`);
});

/** The notifier's rows: events delivered per second end to end, against its floor, per run. */
async function notifierTarget(bundles: Bundles): Promise<(NotifierResult & { ratio: number })[]> {
  console.log("\nNotifier (receipt.created events: queue → notifier → a local receiver answering 204):");
  const results = await benchNotifier(bundles, NOTIFIER_RUNS, receiptBody(2 * KIB));
  const rows = results.map((result) => ({ ...result, ratio: result.eventsPerSecond / result.floorEventsPerSecond }));
  for (const row of rows) {
    const answering = row.pushDelayMs === 0 ? "at once" : `after ${row.pushDelayMs} ms`;
    const goal = row.pushDelayMs === 0 ? ` (goal ≥ ${NOTIFIER_TARGET_RATIO})` : "";
    console.log(
      `  ${row.events} events, answered ${answering}: notifier ${Math.round(row.eventsPerSecond)} events/s, ` +
        `floor ${Math.round(row.floorEventsPerSecond)} events/s, ratio ${row.ratio.toFixed(2)}${goal}`,
    );
  }
  console.log("  D1 round trips per queue batch: the notifier 2 for each shard it touches (claims together, records together); the floor 2 (one claim, one record)");
  return rows;
}

/** The till-to-app rows: add's and delete's answers to their events' pushes, at each rate. */
async function tillToAppTarget(bundles: Bundles, seconds: number): Promise<TillToAppRow[]> {
  console.log(`\nTill to app (${seconds} s of adds, then as many deletes, at each rate; the push's arrival after the till's answer):`);
  const rows = await benchTillToApp(bundles, TILL_TO_APP_RATES, seconds, receiptBody(2 * KIB));
  const header = [
    "adds/s",
    "receipts",
    "created p50 ms",
    "created p99 ms",
    "deleted p50 ms",
    "deleted p99 ms",
    "add's answer p99",
    "delete's answer p99",
    "D1 bytes a receipt",
  ];
  const lines = rows.map((row) =>
    [
      row.rate,
      row.receipts,
      row.created_p50_ms,
      row.created_p99_ms,
      row.deleted_p50_ms,
      row.deleted_p99_ms,
      row.add_answer_p99_ms,
      row.delete_answer_p99_ms,
      row.d1_bytes_per_receipt,
    ].map(String),
  );
  console.log(`\n${formatTable(header, lines)}\n  goal: p99 ≤ ${TILL_TO_APP_TARGET_P99_MS} ms`);
  return rows;
}

/** The request and floor request for a route, made with the run's client and token. */
async function targetsFor(route: RouteName, bench: Bench): Promise<{ api: Target; floor: Target }> {
  const { urls } = bench.runtime;
  const both = (request: Omit<Target, "origin" | "path" | "expectedStatus">, apiPath: string, floorPath: string) => ({
    api: { ...request, origin: urls.api, path: apiPath, expectedStatus: 200 },
    floor: { ...request, origin: urls.floor, path: floorPath, expectedStatus: 200 },
  });
  switch (route) {
    case "trivial": {
      const targets = both({ method: "POST", headers: {} }, API_TRIVIAL, FLOOR_PATHS.trivial);
      return { ...targets, api: { ...targets.api, expectedStatus: 404 } };
    }
    case "login":
      return both({ method: "POST", headers: loginHeaders(bench.client) }, PATHS.login, FLOOR_PATHS.login);
    case "add-dr":
      return both(
        {
          method: "POST",
          headers: { ...addHeaders(bench.client, bench.token), "content-type": drRetailContentType("1.1") },
          body: Buffer.from(JSON.stringify(drRetailReceipt(2 * KIB).body)),
          perRequest: () => ({ "idempotency-key": crypto.randomUUID() }),
        },
        PATHS.add,
        FLOOR_PATHS.add,
      );
    case "add-2k":
    case "add-40k":
      return both(
        {
          method: "POST",
          headers: addHeaders(bench.client, bench.token),
          body: Buffer.from(receiptBody(route === "add-2k" ? 2 * KIB : 40 * KIB)),
          perRequest: () => ({ "idempotency-key": crypto.randomUUID() }),
        },
        PATHS.add,
        FLOOR_PATHS.add,
      );
    case "delete": {
      const poolSize = DELETE_RPS_CEILING * (WARMUP_SECONDS + bench.settings.seconds);
      const seed = () => bench.runtime.seedReceipts(bench.client, APP_USER, poolSize, receiptBody(2 * KIB));
      const deleting = (ids: string[], origin: string, path: string): Target =>
        deleteTarget(bench, ids, origin, path);
      return {
        api: deleting(await seed(), urls.api, PATHS.delete),
        floor: deleting(await seed(), urls.floor, FLOOR_PATHS.delete),
      };
    }
  }
}

/** Deletes each of `ids` once, in order; stops before they run out. */
function deleteTarget(bench: Bench, ids: string[], origin: string, path: string): Target {
  let next = 0;
  return {
    origin,
    path,
    method: "POST",
    headers: { ...tokenHeaders(bench.client, bench.token) },
    perRequest: () => ({ receipt_id: ids[next++] ?? "exhausted" }),
    // autocannon prepares a request per connection ahead of sending it.
    maxRequests: () => ids.length - next - bench.settings.connections,
    expectedStatus: 200,
  };
}

/** One request per operation for the counting Worker, each with a client it has not seen. */
async function countedRequest(operation: Operation, runtime: Runtime): Promise<CountedRequest> {
  if (operation === "trivial") return { path: API_TRIVIAL, headers: {}, expectedStatus: 404 };
  const client = await runtime.issueClient(`count-${operation}`);
  if (operation === "login") return { path: PATHS.login, headers: loginHeaders(client), expectedStatus: 200 };
  const token = await logIn(runtime, client);
  if (operation === "add") {
    const headers = { ...addHeaders(client, token), "idempotency-key": crypto.randomUUID() };
    return { path: PATHS.add, headers, body: receiptBody(2 * KIB), expectedStatus: 200 };
  }
  const [receiptId] = await runtime.seedReceipts(client, APP_USER, 1, receiptBody(2 * KIB));
  return { path: PATHS.delete, headers: { ...tokenHeaders(client, token), receipt_id: receiptId! }, expectedStatus: 200 };
}

/** Warms both targets up, then times them in alternating turns; also returns each turn's p99 ratio. */
async function compare(api: Target, floor: Target, settings: LoadSettings): Promise<[Measurement, Measurement, number[]]> {
  const warmUps = [await sample(api, settings.connections, WARMUP_SECONDS), await sample(floor, settings.connections, WARMUP_SECONDS)];
  if (warmUps.some((warmUp) => Object.keys(warmUp.failures).length > 0)) {
    const [apiRun, floorRun] = [summarize([warmUps[0]!]), summarize([warmUps[1]!])];
    return [apiRun, floorRun, [apiRun.p99Ms / floorRun.p99Ms]];
  }
  const turns: [Sample[], Sample[]] = [[], []];
  const p99Ratios: number[] = [];
  for (let round = 0; round < ROUNDS; round += 1) {
    const [apiTurn, floorTurn] = [await sample(api, settings.connections, settings.seconds / ROUNDS), await sample(floor, settings.connections, settings.seconds / ROUNDS)];
    turns[0].push(apiTurn);
    turns[1].push(floorTurn);
    // A turn in which either side got no answer in time has no p99 to compare.
    if (apiTurn.latenciesMs.length > 0 && floorTurn.latenciesMs.length > 0) {
      p99Ratios.push(summarize([apiTurn]).p99Ms / summarize([floorTurn]).p99Ms);
    }
  }
  const [apiRun, floorRun] = [summarize(turns[0]), summarize(turns[1])];
  return [apiRun, floorRun, p99Ratios.length > 0 ? p99Ratios : [apiRun.p99Ms / floorRun.p99Ms]];
}

function describeFailures(label: string, run: Measurement): string[] {
  return Object.entries(run.failures).map(([kind, count]) => `${label}: ${count} × ${kind}`);
}

function resultRow(route: RouteName, run: Measurement, floor: Measurement, p99Ratios: number[]): ResultRow {
  const sorted = [...p99Ratios].sort((a, b) => a - b);
  return {
    route,
    rps: Math.round(run.rps),
    p50_ms: run.p50Ms,
    p99_ms: run.p99Ms,
    floor_rps: Math.round(floor.rps),
    floor_p99_ms: floor.p99Ms,
    ratio: round2(run.rps / floor.rps),
    p99_ratio: round2(sorted[Math.floor((sorted.length - 1) / 2)]!),
    p99_ratio_turns: [round2(sorted[0]!), round2(sorted.at(-1)!)],
  };
}

// Each route's D1 rows written per request (through the counting Worker) beside its ratios, so a
// change that writes more shows in the same table.
function printTable(rows: ResultRow[], rowsWrittenBy: Partial<Record<Operation, number>>): void {
  const header = ["route", "req/s", "p50 ms", "p99 ms", "floor req/s", "floor p99", "ratio (goal)", "p99 ratio (goal)", "turns' p99 ratios", "D1 rows written"];
  const lines = rows.map((row) => {
    const goal = ratioGoal(row.route, rows);
    return [
      row.route,
      String(row.rps),
      String(row.p50_ms),
      String(row.p99_ms),
      String(row.floor_rps),
      String(row.floor_p99_ms),
      `${row.ratio.toFixed(2)} (${goal === undefined ? "-" : `≥ ${goal}`})`,
      `${row.p99_ratio.toFixed(2)} (${goal === undefined ? "-" : `≤ ${TARGET_P99_RATIO}`})`,
      `${row.p99_ratio_turns[0].toFixed(2)}–${row.p99_ratio_turns[1].toFixed(2)}`,
      String(rowsWrittenBy[OPERATION[row.route]] ?? "-"),
    ];
  });
  console.log(`\n${formatTable(header, lines)}\n`);
}

// add-dr's goal follows add-2k's measured ratio, when add-2k ran too.
function ratioGoal(route: RouteName, rows: readonly ResultRow[]): number | undefined {
  if (route !== "add-dr") return TARGET_RATIO[route];
  const add2k = rows.find((row) => row.route === "add-2k");
  return add2k === undefined ? undefined : round2(add2k.ratio - DR_GOAL_BELOW_ADD_2K);
}

// The notifier's and the till-to-app targets are chosen like a route: by default, or when `--only` names them.
function withTarget(only: string | undefined, target: string): boolean {
  return only === undefined || only.split(",").map((name) => name.trim()).includes(target);
}

function selectRoutes(only: string | undefined): RouteName[] {
  if (only === undefined) return [...ROUTES];
  const names = only.split(",").map((name) => name.trim()).filter((name) => name !== NOTIFIER && name !== TILL_TO_APP);
  const unknown = names.filter((name) => !(ROUTES as readonly string[]).includes(name));
  if (unknown.length > 0) throw new UsageError(`--only: unknown route ${unknown.join(", ")}`);
  return ROUTES.filter((route) => names.includes(route));
}

function secondsSince(start: number): string {
  return ((Date.now() - start) / 1000).toFixed(1);
}

function kib(bytes: number): string {
  return (bytes / KIB).toFixed(1);
}

function round2(value: number): number {
  return Math.round(value * 100) / 100;
}
