/**
 * Builds what the bench runs: both Workers exactly as `npm run build` makes them for deployment,
 * and the bench's own floor and counting Workers with the same bundler and settings.
 */
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import path from "node:path";
import { gzipSync } from "node:zlib";
import { PROJECT_ROOT, wrangler } from "../scripts/lib/wrangler.ts";

/** Absolute paths of the built scripts. */
export interface Bundles {
  api: string;
  notifier: string;
  floor: string;
  counted: string;
  /** The notifier's floor: a consumer that only pushes and acks. */
  floorConsumer: string;
}

/** A deployed Worker's size and the most it may weigh (a smaller script starts sooner). */
export interface BundleSize {
  worker: "api" | "notifier";
  gzipBytes: number;
  limitBytes: number;
}

const KIB = 1024;
const DIST = path.join(PROJECT_ROOT, "dist");
const BENCH_DIST = path.join(DIST, "bench");

/** Runs the builds; throws with the build's output when one fails. */
export function buildAll(): Bundles {
  return {
    ...buildDeployed(),
    floor: bundleHarnessWorker("bench/workers/floor.ts", BENCH_DIST),
    counted: bundleHarnessWorker("bench/workers/counted.ts", BENCH_DIST),
    floorConsumer: bundleHarnessWorker("bench/workers/floor-consumer.ts", BENCH_DIST),
  };
}

/** Both Workers as `npm run build` makes them for deployment; throws with its output if it fails. */
export function buildDeployed(): Pick<Bundles, "api" | "notifier"> {
  const build = spawnSync("npm", ["run", "build"], { cwd: PROJECT_ROOT, encoding: "utf8" });
  if (build.status !== 0) throw new Error(`npm run build failed:\n${build.stderr || build.stdout}`);
  return { api: path.join(DIST, "api/index.js"), notifier: path.join(DIST, "notifier/index.js") };
}

/**
 * Bundles a Worker of a harness (`entry`, relative to the project) into `outdir` and returns the
 * bundle's path. Harness Workers are named on the command line, not in a wrangler config, so
 * nothing can deploy them; wrangler still takes its build settings (minify) from the API
 * Worker's config.
 */
export function bundleHarnessWorker(entry: string, outdir: string): string {
  wrangler(["deploy", "--dry-run", "--outdir", outdir, entry]);
  return path.join(outdir, `${path.basename(entry, ".ts")}.js`);
}

/** Gzip sizes of the deployed Workers: what a cold start has to load. */
export function bundleSizes(bundles: Bundles): BundleSize[] {
  return [
    { worker: "api", gzipBytes: gzipSize(bundles.api), limitBytes: 100 * KIB },
    { worker: "notifier", gzipBytes: gzipSize(bundles.notifier), limitBytes: 30 * KIB },
  ];
}

function gzipSize(file: string): number {
  return gzipSync(readFileSync(file)).byteLength;
}
