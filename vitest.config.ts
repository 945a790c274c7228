import path from "node:path";
import { cloudflareTest, readD1Migrations } from "@cloudflare/vitest-plugin";
import { configDefaults, defineConfig } from "vitest/config";
import { writeDocsAssets } from "./scripts/docs-assets.ts";
import { TEST_AUDIT_HASH_KEY, TEST_TOKEN_KEYS } from "./test/support/keys.ts";
import { PUSH_LOG_NAMESPACE, TEST_SHARD, notifierWorkers } from "./test/support/notifier-worker.ts";

const root = import.meta.dirname;

export default defineConfig(async () => {
  const migrations = await readD1Migrations(path.join(root, "migrations"));
  // wrangler.toml's [assets] folder must hold the API reference's files before the Workers start.
  writeDocsAssets();
  return {
    test: {
      projects: [
        {
          // The Workers themselves, inside workerd against local D1, KV and Queues.
          plugins: [
            cloudflareTest({
              main: "./src/api/index.ts",
              wrangler: { configPath: "./wrangler.toml" },
              miniflare: {
                bindings: {
                  TEST_MIGRATIONS: migrations,
                  TOKEN_KEYS: JSON.stringify(TEST_TOKEN_KEYS),
                  AUDIT_HASH_KEY: TEST_AUDIT_HASH_KEY,
                  // Tests change client records and shard states and expect the next request to see it.
                  CLIENT_CACHE_SECONDS: "0",
                  SHARD_STATES_SECONDS: "0",
                  // The deadline tests wait it out in real time; 10 s deployed.
                  BODY_DEADLINE_SECONDS: "2",
                  // Every receipt is old enough for the archive's next run (storage is per test file,
                  // and only a test starts that run); the local ARCHIVE bucket comes from wrangler.toml.
                  ARCHIVE_AFTER_DAYS: "0",
                },
                // A third shard beside the two of wrangler.toml: the suite runs on three.
                d1Databases: TEST_SHARD,
                // The notifier consumes the API's real queue beside it; tests read its pushes here.
                workers: notifierWorkers(),
                kvNamespaces: { PUSH_LOG: PUSH_LOG_NAMESPACE },
              },
            }),
          ],
          test: {
            name: "workers",
            // Every request logs a line; show them only for a test that fails.
            silent: "passed-only",
            globalSetup: ["./test/support/notifier-worker.ts"],
            include: ["test/api/**/*.test.ts", "test/notifier/**/*.test.ts", "test/storage/**/*.test.ts", "test/client/**/*.test.ts", "test/fuzz/**/*.test.ts"],
            // A `.node.test.ts` file drives the code it tests from outside (wrangler dev): it runs on Node.
            exclude: [...configDefaults.exclude, "**/*.node.test.ts"],
            // Requests per fuzzed route: `npm test` runs a smoke of each route's campaign (100), `npm run
            // fuzz` the full one (FUZZ_RUNS); FUZZ_SEED replays a campaign; FUZZ_SECONDS bounds each
            // route's campaign, so that `npm test` stays fast whatever the machine.
            provide: {
              fuzzRuns: Number(process.env.FUZZ_RUNS) || 100,
              fuzzSeconds: Number(process.env.FUZZ_SECONDS) || 60,
              fuzzSeed: process.env.FUZZ_SEED ? Number(process.env.FUZZ_SEED) : null,
            },
            setupFiles: ["./test/support/apply-migrations.ts"],
          },
        },
        {
          // Operator scripts, documents, the examples and the soak's rules, which run on Node.
          test: {
            name: "node",
            silent: "passed-only",
            environment: "node",
            // Each operator command starts wrangler, which takes a second or two.
            testTimeout: 60_000,
            include: ["test/scripts/**/*.test.ts", "test/docs/**/*.test.ts", "test/examples/**/*.test.ts", "test/soak/**/*.test.ts", "test/**/*.node.test.ts"],
          },
        },
      ],
    },
  };
});
