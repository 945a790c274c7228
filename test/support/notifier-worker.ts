/**
 * The notifier Worker beside the API Worker in the "workers" test project (docs/api.md#deletion-notices), so a
 * notice crosses Workers for real: API → notices queue → notifier → push receiver. Runs on Node:
 * the config reads `notifierWorkers()`, and as a globalSetup this module bundles the notifier
 * first, because auxiliary workers are not compiled by Vite.
 */
import { execFileSync } from "node:child_process";
import { rmSync } from "node:fs";
import path from "node:path";
import { unstable_getMiniflareWorkerOptions } from "wrangler";
import { TEST_PUSH_SECRET } from "./keys.ts";

const ROOT = path.resolve(import.meta.dirname, "../..");
const NOTIFIER_CONFIG = path.join(ROOT, "src/notifier/wrangler.jsonc");

// Inside the project, since workerd names modules relative to it, and per vitest process, so that
// two runs side by side never overwrite each other's bundle.
const BUNDLE_DIR = path.join(ROOT, ".wrangler", "vitest", `notifier-${process.pid}`);

/** Where the test notifier pushes; the push receiver answers every URL. */
export const TEST_PUSH_URL = "https://push.example.test/receipts";

/** The KV namespace where the push receiver records pushes (test/support/push-receiver.js). */
export const PUSH_LOG_NAMESPACE = "push-log";

/** The test run's third shard, bound in both Workers beside the two of the wrangler configs. */
export const TEST_SHARD = { DB_S3: "00000000-0000-4000-8000-000000000003" };

/** Miniflare options of the notifier, from its own wrangler.jsonc, and of the push receiver. */
export function notifierWorkers() {
  // The fields read here; the rest (D1, the producer binding) passes through as wrangler made it.
  const { workerOptions } = unstable_getMiniflareWorkerOptions(NOTIFIER_CONFIG) as unknown as {
    workerOptions: {
      compatibilityDate: string;
      bindings?: Record<string, unknown>;
      queueConsumers?: Record<string, Record<string, unknown>>;
      [option: string]: unknown;
    };
  };
  const { modulesRules: _rules, rootPath: _root, queueConsumers, ...options } = workerOptions;
  return [
    {
      ...options,
      name: "notifier",
      modules: true,
      scriptPath: path.join(BUNDLE_DIR, "index.js"),
      // Over a developer's src/notifier/.dev.vars: the tests verify with this very secret.
      bindings: { ...options.bindings, APP_PUSH_URL: TEST_PUSH_URL, APP_PUSH_SECRET: TEST_PUSH_SECRET },
      d1Databases: { ...(options.d1Databases as Record<string, string>), ...TEST_SHARD },
      // The configured consumers, waiting 50 ms rather than a second for a batch to fill.
      queueConsumers: Object.fromEntries(
        Object.entries(queueConsumers ?? {}).map(([queue, consumer]) => [queue, { ...consumer, maxBatchTimeout: 0.05 }]),
      ),
      outboundService: "push-receiver",
    },
    {
      name: "push-receiver",
      modules: true,
      scriptPath: path.join(ROOT, "test/support/push-receiver.js"),
      compatibilityDate: options.compatibilityDate,
      kvNamespaces: { PUSH_LOG: PUSH_LOG_NAMESPACE },
    },
  ];
}

/** globalSetup: bundles the notifier as `npm run build` does, and removes the bundle after. */
export default function bundleNotifier(): () => void {
  execFileSync("wrangler", ["deploy", "--dry-run", "-c", NOTIFIER_CONFIG, "--outdir", BUNDLE_DIR], {
    cwd: ROOT,
    stdio: ["ignore", "ignore", "inherit"],
    env: { ...process.env, WRANGLER_SEND_METRICS: "false", NO_COLOR: "1" },
  });
  return () => rmSync(BUNDLE_DIR, { recursive: true, force: true });
}
