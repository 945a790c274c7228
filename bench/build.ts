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

/** A deployed Worker's size and the most it may weigh (issue 6). */
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
  const build = spawnSync("npm", ["run", "build"], { cwd: PROJECT_ROOT, encoding: "utf8" });
  if (build.status !== 0) throw new Error(`npm run build failed:\n${build.stderr || build.stdout}`);
  // The bench Workers are named on the command line, not in a wrangler config, so nothing can
  // deploy them; wrangler still takes its build settings (minify) from the API Worker's config.
  for (const entry of ["floor", "counted", "floor-consumer"]) {
    wrangler(["deploy", "--dry-run", "--outdir", BENCH_DIST, `bench/workers/${entry}.ts`]);
  }
  return {
    api: path.join(DIST, "api/index.js"),
    notifier: path.join(DIST, "notifier/index.js"),
    floor: path.join(BENCH_DIST, "floor.js"),
    counted: path.join(BENCH_DIST, "counted.js"),
    floorConsumer: path.join(BENCH_DIST, "floor-consumer.js"),
  };
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
