import { readdirSync, readFileSync } from "node:fs";
import { availableParallelism } from "node:os";
import path from "node:path";
import { cloudflareTest, readD1Migrations } from "@cloudflare/vitest-plugin";
import { configDefaults, defineConfig } from "vitest/config";
import { writeDocsAssets } from "./scripts/docs-assets.ts";
import { TEST_AUDIT_HASH_KEY, TEST_TOKEN_KEYS } from "./test/support/keys.ts";
import { PUSH_LOG_NAMESPACE, TEST_SHARD, notifierWorkers } from "./test/support/notifier-worker.ts";
import TakingTurns from "./test/support/sequencer.ts";

const root = import.meta.dirname;

// Node keeps the code it compiled here for the next process to reuse (Node before 22.1 ignores
// it). The node files start wrangler and the operator scripts again and again, and each start of
// wrangler (2.4 s of CPU for `wrangler --version` on a 2-core machine) compiled its bundle anew:
// two of those files spent 78 s of CPU without the cache, 62–68 s with it. The test processes, and
// every process they start, inherit it.
process.env.NODE_COMPILE_CACHE ??= path.join(root, "node_modules", ".cache", "node-compile");

// The files of the "workers-wide" project, and its 24 shards beside the test run's three.
const WIDE_FILES = ["test/api/workflows/erasure-parts.test.ts"];
const WIDE_SHARDS = Object.fromEntries(
  Array.from({ length: 24 }, (_, index) => [`DB_W${index + 1}`, `00000000-0000-4000-8000-1000000000${String(index + 1).padStart(2, "0")}`]),
);
// 27 shards take 29 steps in one instance; in parts of 4 every instance stays within 16.
const WIDE_STEP_LIMIT = 16;
const WIDE_PART_SHARDS = 4;

// Every project's bounds, sized for a machine three times slower than the team's and busy. A test
// makes tens to hundreds of requests through workerd or starts wrangler (a second or two a
// command), and Vitest's 5 s default failed 15 of them on such a machine with the suite's other
// files beside them; a hook starts a runtime (the local state, npm start, a Miniflare), and one
// took past the 10 s default with a core busy. A test that does more sets its own bound where its
// work is.
const TIMEOUTS = { testTimeout: 60_000, hookTimeout: 120_000 };

// Every package the Workers import, as src/ names them (a subpath counts apart), and the tests'
// property library: each is bundled once per run instead of loaded module by module into every
// test file's runtime, which took the workers files' import time from 388 s to 211 s (summed). Read
// from the import lines rather than listed, since a part of a package left out would load as a
// second copy beside the bundle's: with hono/route left out, every request answered 500.
const WORKER_PACKAGES = [
  ...new Set(
    readdirSync(path.join(root, "src"), { recursive: true, encoding: "utf8" })
      .filter((file) => file.endsWith(".ts") && !file.endsWith(".d.ts"))
      .flatMap((file) => [...readFileSync(path.join(root, "src", file), "utf8").matchAll(/\sfrom\s*"([^".][^":]*)"/g)].map((match) => match[1]!)),
  ),
  "fast-check",
];
const PREBUNDLED = { optimizer: { ssr: { enabled: true, include: WORKER_PACKAGES } } };

// The node files that run after every other, alone (the "node-alone" project).
const NODE_ALONE_FILES = ["test/scripts/app-users.test.ts"];

export default defineConfig(async () => {
  const migrations = await readD1Migrations(path.join(root, "migrations"));
  // wrangler.jsonc's `assets` folder must hold the API reference's files before the Workers start.
  writeDocsAssets();
  const apiWorker = { main: "./src/api/index.ts", wrangler: { configPath: "./wrangler.jsonc" } };
  const apiBindings = {
    TEST_MIGRATIONS: migrations,
    TOKEN_KEYS: JSON.stringify(TEST_TOKEN_KEYS),
    AUDIT_HASH_KEY: TEST_AUDIT_HASH_KEY,
    // Tests change client records and shard states and expect the next request to see it.
    CLIENT_CACHE_SECONDS: "0",
    SHARD_STATES_SECONDS: "0",
    // The deadline tests wait it out in real time; 10 s deployed.
    BODY_DEADLINE_SECONDS: "2",
    // Every receipt is old enough for the archive's next run (storage is per test file, and only a
    // test starts that run); the local ARCHIVE bucket comes from wrangler.jsonc.
    ARCHIVE_AFTER_DAYS: "0",
  };
  return {
    test: {
      // Every request logs a line; show them only for a test that fails. The reporter reads this
      // of the root config alone: set on each project, it was ignored and the run printed them all.
      silent: "passed-only" as const,
      // Vitest's default, a worker less than the cores, runs one file at a time on two cores. A file
      // spends most of its time waiting on other processes (workerd, wrangler, npm start) or on a
      // window, a tail or a claim running out, so files alongside it take little from it: two node
      // files ran in 41 s instead of 81, and the whole suite on two cores, with two other suites
      // running on the machine, in 366 s with four workers against 448 s with two.
      maxWorkers: Math.max(2, 2 * availableParallelism()),
      // The node and workers files side by side rather than one project after the other.
      sequence: { sequencer: TakingTurns },
      projects: [
        {
          // The Workers themselves, inside workerd against local D1, KV and Queues.
          plugins: [
            cloudflareTest({
              ...apiWorker,
              miniflare: {
                bindings: {
                  ...apiBindings,
                  // Erasures on the three shards run in two parts (500 shards a part deployed).
                  ERASURE_PART_SHARDS: "2",
                },
                // A third shard beside the two of wrangler.jsonc: the suite runs on three.
                d1Databases: TEST_SHARD,
                // The notifier consumes the API's real queue beside it; tests read its pushes here.
                workers: notifierWorkers(),
                kvNamespaces: { PUSH_LOG: PUSH_LOG_NAMESPACE },
              },
            }),
          ],
          test: {
            name: "workers",
            ...TIMEOUTS,
            globalSetup: ["./test/support/notifier-worker.ts"],
            include: ["test/api/**/*.test.ts", "test/notifier/**/*.test.ts", "test/storage/**/*.test.ts", "test/client/**/*.test.ts", "test/fuzz/**/*.test.ts"],
            // A `.node.test.ts` file drives the code it tests from outside (wrangler dev): it runs on Node.
            exclude: [...configDefaults.exclude, "**/*.node.test.ts", ...WIDE_FILES],
            // Requests per fuzzed route: `npm test` runs a smoke of each route's campaign (100), `npm run
            // fuzz` the full one (FUZZ_RUNS); FUZZ_SEED replays a campaign; FUZZ_SECONDS bounds each
            // route's campaign, so that `npm test` stays fast whatever the machine.
            provide: {
              fuzzRuns: Number(process.env.FUZZ_RUNS) || 100,
              fuzzSeconds: Number(process.env.FUZZ_SECONDS) || 60,
              fuzzSeed: process.env.FUZZ_SEED ? Number(process.env.FUZZ_SEED) : null,
            },
            setupFiles: ["./test/support/apply-migrations.ts"],
            deps: PREBUNDLED,
          },
        },
        {
          // The erasure over more shards than one Workflow instance has steps for (docs/scale.md
          // §6): the API Worker alone, on 27 shards, a part of an erasure taking WIDE_PART_SHARDS,
          // and every instance of the erasure's Workflow held to WIDE_STEP_LIMIT steps (the
          // runtime fails an instance that takes one more).
          plugins: [
            cloudflareTest({
              ...apiWorker,
              miniflare: {
                bindings: { ...apiBindings, ERASURE_PART_SHARDS: String(WIDE_PART_SHARDS) },
                d1Databases: { ...TEST_SHARD, ...WIDE_SHARDS },
                workflows: { ERASURE: { name: "receipts-v2-erasure", className: "ErasureWorkflow", stepLimit: WIDE_STEP_LIMIT } },
              },
            }),
          ],
          test: {
            name: "workers-wide",
            ...TIMEOUTS,
            include: WIDE_FILES,
            provide: { wideStepLimit: WIDE_STEP_LIMIT, widePartShards: WIDE_PART_SHARDS },
            setupFiles: ["./test/support/apply-migrations.ts"],
            deps: PREBUNDLED,
          },
        },
        {
          // The operator's erasure and export commands against a real `npm start`, after every
          // other file, alone: a job of npm start's Workflows that was waiting (an export's wait for
          // adds in flight) was seen never to end when another test file's runtime started meanwhile.
          test: {
            name: "node-alone",
            environment: "node",
            ...TIMEOUTS,
            globalSetup: ["./test/support/migrated-state.ts"],
            include: NODE_ALONE_FILES,
            sequence: { groupOrder: 1 },
          },
        },
        {
          // Operator scripts, documents, the examples and the soak's rules, which run on Node.
          test: {
            name: "node",
            environment: "node",
            ...TIMEOUTS,
            // The shards' migrations, applied once for every file to copy.
            globalSetup: ["./test/support/migrated-state.ts"],
            include: ["test/scripts/**/*.test.ts", "test/docs/**/*.test.ts", "test/examples/**/*.test.ts", "test/soak/**/*.test.ts", "test/**/*.node.test.ts"],
            exclude: [...configDefaults.exclude, ...NODE_ALONE_FILES],
          },
        },
      ],
    },
  };
});
