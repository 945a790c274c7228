/**
 * `npm run soak`: proof under faults. Runs both Workers as `npm run build` made them
 * under Miniflare, with two shards, the notifier and the cron, against a local push receiver that
 * verifies every signature; drives POS tills at them while a seeded plan of faults strikes; lets
 * the pipeline drain; moves every receipt to the archive under D1 and R2 faults; reconciles every
 * answer, delivery, row and archived line, and every export the app asked for (soak/app-jobs.ts);
 * prints the table. Exits 1 when
 * anything was lost, reordered, answered 5xx with no fault behind it, or otherwise wrong, or when
 * a kind of fault was never injected. docs/reliability.md says how to read it.
 */
import { setTimeout as sleep } from "node:timers/promises";
import { readShards } from "../scripts/lib/shards.ts";
import { API_CONFIG } from "../harness/miniflare.ts";
import { UsageError, parse, positiveInteger, runCli } from "../scripts/lib/cli.ts";
import { FaultDriver } from "./driver.ts";
import { archiveUnderFaults } from "./archive.ts";
import { checkExports, exportOverApi } from "./app-jobs.ts";
import { soakErasure } from "./erasure.ts";
import { APP_USERS, runLoad } from "./load.ts";
import { PUSH_FAULT_RATE, planFaults } from "./plan.ts";
import { Prng } from "./prng.ts";
import { RebuildingAppSide } from "./rebuild.ts";
import { startPushReceiver } from "./receiver.ts";
import { PROBLEMS, reconcile } from "./reconcile.ts";
import { countFaults, printReport } from "./report.ts";
import { floodFailures, floodSummary, floodTable } from "./flood.ts";
import { SOAK_ADD_LIMIT, SOAK_TILL_TIER, SOAK_VARS, buildSoakBundles, startSoakRuntime } from "./runtime.ts";
import { drain, snapshotStore } from "./store.ts";
import { shardOfId } from "../src/shared/shard-ids.ts";

const USAGE = `Usage: npm run soak -- [--seconds <n>] [--concurrency <n>] [--seed <n>]

  --seconds <n>       seconds of load, faults among them (default ${defaults().seconds})
  --concurrency <n>   POS tills sending at once, one client each (default ${defaults().concurrency})
  --seed <n>          replays a run: the same fault plan and load mix (default: a new one, printed)
  --log <file>        writes every line the Workers log to <file>, for a failed run's post-mortem`;

/** The cron's period: a minute in production, short here so that re-sends play out within the run. */
const CRON_PERIOD_MS = 2000;
/**
 * The operator's pause between erasures, in ms: several a minute, each racing the adds the tills
 * keep sending for the app user being erased. An erasure under faults takes seconds and holds the
 * next restart off (FaultDriver.outsideRestarts): closer erasures would push the restarts past the
 * pushes they must cut off mid-batch.
 */
const ERASURE_PAUSE_MS = [5000, 12000] as const;
/** The flooding client's requests at once, each sent as soon as the one before was answered. */
const FLOOD_CONNECTIONS = 8;
/** The drain gives up after this long; the events still undelivered then count as lost. */
const DRAIN_LIMIT_MS = 180_000;

function defaults() {
  return { seconds: 150, concurrency: 8 };
}

await runCli(USAGE, async (argv) => {
  const started = Date.now();
  const { values, positionals } = parse(argv, {
    seconds: { type: "string", default: String(defaults().seconds) },
    concurrency: { type: "string", default: String(defaults().concurrency) },
    seed: { type: "string" },
    log: { type: "string" },
  });
  if (positionals.length > 0) throw new UsageError(`Unexpected argument: ${positionals[0]}`);
  const seconds = positiveInteger("--seconds", values.seconds);
  const concurrency = positiveInteger("--concurrency", values.concurrency);
  const seed = values.seed === undefined ? Math.floor(Math.random() * 2 ** 31) : positiveInteger("--seed", values.seed);
  const prng = new Prng(seed);
  console.log(`Soak: seed ${seed} (replay: npm run soak -- --seconds ${seconds} --concurrency ${concurrency} --seed ${seed})`);

  const bundles = buildSoakBundles();
  const shards = readShards(API_CONFIG);
  const plan = planFaults(prng.fork("plan"), seconds, shards.map((shard) => shard.name));
  const secret = `whsec_${Buffer.from(crypto.getRandomValues(new Uint8Array(32))).toString("base64")}`;
  const receiver = await startPushReceiver({
    secret,
    prng: prng.fork("receiver"),
    pushTimeoutMs: Number(SOAK_VARS.notifier.PUSH_TIMEOUT_SECONDS) * 1000,
  });
  const runtime = await startSoakRuntime(bundles, receiver.url, secret, values.log);
  console.log(`Built and started in ${secondsSince(started)} s; ${seconds} s of load from ${concurrency} tills, ${plan.length} planned faults.`);
  try {
    const clients = await Promise.all(
      Array.from({ length: concurrency }, (_, i) => runtime.issueClient(`soak-till-${i}`, `soak-chain-${i}`, SOAK_TILL_TIER)),
    );
    const floodClient = await runtime.issueClient("soak-flood", "soak-chain-flood");
    const appClient = await runtime.issueAppClient("soak-app");
    const app = { baseUrl: runtime.apiUrl, clientId: appClient.clientId, clientSecret: appClient.secret };
    const appSide = new RebuildingAppSide(app);
    const driver = new FaultDriver(runtime, receiver, prng.fork("driver"));
    const loadStarted = Date.now();
    const until = loadStarted + seconds * 1000;
    receiver.setFaultRate(PUSH_FAULT_RATE);
    let loading = true;
    const cron = (async () => {
      while (loading) {
        await sleep(CRON_PERIOD_MS);
        await driver.idle();
        // A cron run cut off by a restart is one the next tick makes up for.
        await runtime.runCron().catch(() => undefined);
      }
    })();
    // Halfway through the load the app side loses its store and rebuilds it from the feed.
    const rebuilt = sleep((seconds * 1000) / 2).then(() => appSide.rebuild());
    const [load] = await Promise.all([
      runLoad({
        apiUrl: runtime.apiUrl,
        clients,
        prng: prng.fork("load"),
        until,
        shardTags: shards.map((shard) => shard.tag),
        erasure: soakErasure(runtime, ERASURE_PAUSE_MS, (work) => driver.outsideRestarts(work), app),
        flood: { client: floodClient, connections: FLOOD_CONNECTIONS },
      }),
      driver.play(plan, loadStarted),
    ]);
    loading = false;
    await cron;
    await driver.heal();
    receiver.setFaultRate(0);
    console.log(`Load done at ${secondsSince(started)} s (${load.requests.length} requests); draining.`);

    const drained = await drain(runtime, CRON_PERIOD_MS, DRAIN_LIMIT_MS);
    await rebuilt;
    // The feed leaves out the created events of receipts gone from their shard, archived ones too
    // when the archive age is below the feed's window, as here: the app side settles first.
    const rebuild = await appSide.settle(await snapshotStore(runtime));
    const archived = await archiveUnderFaults(runtime, prng.fork("archive"));
    const store = await snapshotStore(runtime);
    console.log(`Archived at ${secondsSince(started)} s; the app exports every shopper.`);
    // Once everything is archived and quiet, the app exports every shopper: each file must be
    // exactly what the store holds of them, archived receipts included.
    const finalExports = await Promise.all(APP_USERS.map((appUserId) => exportOverApi(app, appUserId, "after archive")));
    const exports = await checkExports([...load.exports, ...finalExports], load, store, await runtime.archive());
    const result = reconcile({
      load,
      deliveries: receiver.deliveries,
      faults: driver.windows,
      store,
      shardOf: (id) => shardOfId(shards, id)?.name,
      now: Date.now(),
    });
    const faults = countFaults(receiver.deliveries, await runtime.injected(), driver.windows, driver.restartsMidBatch);
    const flood = floodSummary(load, SOAK_ADD_LIMIT);
    const failures = [
      ...floodFailures(flood),
      ...PROBLEMS.filter((problem) => result.problems[problem].length > 0).map((problem) => `${result.problems[problem].length} × ${problem}`),
      ...Object.entries(faults).filter(([, count]) => count === 0).map(([kind]) => `never injected: ${kind}`),
      ...(drained.complete ? [] : [`the drain did not finish within ${DRAIN_LIMIT_MS / 1000} s`]),
      ...(drained.afterRetries.length > 0 ? [`${drained.afterRetries.length} × dead-lettered after retries: needed an operator's replay`] : []),
      ...(result.events.racing.erased + result.events.racing.kept === 0 ? ["no add raced an erasure of its app user"] : []),
      ...(exports.problems.length > 0 ? [`${exports.problems.length} × export mismatch`] : []),
      ...(exports.checked.load === 0 ? ["no export ran during the load"] : []),
      ...(rebuild.missing.length > 0 ? [`${rebuild.missing.length} × held by the shards, missing from the store rebuilt from the feed`] : []),
      ...(rebuild.extra.length > 0 ? [`${rebuild.extra.length} × in the store rebuilt from the feed, gone from the shards`] : []),
      ...load.erasures.flatMap(({ appUserId, scan }, i) =>
        scan && scan.findings.length > 0 ? [`${scan.findings.length} × a copy of ${appUserId} after erasure ${i + 1}: in a file or a live row that may not hold it`] : [],
      ),
    ];
    printReport({
      heading: `\nSeed ${seed}: ${seconds} s of load, ${concurrency} tills, ${shards.length} shards; wall time ${secondsSince(started)} s.`,
      result,
      faults,
      drain: drained,
      windows: driver.windows,
      erasures: load.erasures,
      exports,
      failures,
    });
    console.log(`\n${floodTable(flood)}`);
    const moves = archived.reduce((sum, { attempts }) => sum + attempts, 0);
    const failedMoves = archived.reduce((sum, { failed }) => sum + failed, 0);
    console.log(
      `Archived under D1 and R2 faults: ${archived.reduce((sum, { receipts }) => sum + receipts, 0)} receipts moved by ${moves} ` +
        `instances (${failedMoves} failed and run again); ${store.archived} receipts in the archive, each once.`,
    );
    console.log(
      `Store lost mid-run and rebuilt from the event feed: ${rebuild.events} events read, ${rebuild.receipts} receipts rebuilt, ` +
        `${rebuild.missing.length} missing, ${rebuild.extra.length} extra (first: ${[...rebuild.missing, ...rebuild.extra].slice(0, 3).join("; ") || "none"}).`,
    );
    if (failures.length > 0) {
      const problems = runtime.recentProblems();
      if (problems.length > 0) console.log(`\nLast warnings and errors the Workers logged:\n  ${problems.join("\n  ")}`);
      process.exitCode = 1;
    }
  } finally {
    await runtime.dispose();
    await receiver.close();
  }
});

function secondsSince(start: number): string {
  return ((Date.now() - start) / 1000).toFixed(1);
}
