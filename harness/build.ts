/**
 * Builds shared by the harnesses (bench, soak): both Workers exactly as `npm run build` makes them
 * for deployment, and a harness's own Workers with the same bundler and settings.
 */
import { spawnSync } from "node:child_process";
import path from "node:path";
import { PROJECT_ROOT, wrangler } from "../scripts/lib/wrangler.ts";

/** Absolute paths of the deployed Workers' bundles. */
export interface DeployedBundles {
  api: string;
  notifier: string;
}

/** Where `npm run build` and the harnesses put their bundles. */
export const DIST = path.join(PROJECT_ROOT, "dist");

/** Both Workers as `npm run build` makes them for deployment; throws with its output if it fails. */
export function buildDeployed(): DeployedBundles {
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
