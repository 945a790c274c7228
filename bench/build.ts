/**
 * Builds what the bench runs: both Workers as deployed (harness/build.ts), and the bench's own
 * floor and counting Workers with the same bundler and settings.
 */
import { readFileSync } from "node:fs";
import path from "node:path";
import { gzipSync } from "node:zlib";
import { DIST, buildDeployed, bundleHarnessWorker, type DeployedBundles } from "../harness/build.ts";

/** Absolute paths of the built scripts. */
export interface Bundles extends DeployedBundles {
  floor: string;
  counted: string;
  /** The notifier's floor: a consumer that claims, signs each push, and records. */
  floorConsumer: string;
}

/** A deployed Worker's size and the most it may weigh (a smaller script starts sooner). */
export interface BundleSize {
  worker: "api" | "notifier";
  gzipBytes: number;
  limitBytes: number;
}

const KIB = 1024;
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
