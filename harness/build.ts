/**
 * Builds shared by the harnesses (bench, soak): both Workers exactly as `npm run build` makes them
 * for deployment, and a harness's own Workers with the same bundler and settings.
 */
import { spawnSync } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import { readConfigFile, type ConfigObject } from "../scripts/lib/config.ts";
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
 * bundle's path. Harness Workers are named on the command line, so nothing can deploy them; they
 * are bundled with the API Worker's compatibility date and its minify and keep_names settings, but under a config of
 * their own: the API Worker's would ask every entry to export its Workflow classes.
 */
export function bundleHarnessWorker(entry: string, outdir: string): string {
  mkdirSync(outdir, { recursive: true });
  const config = path.join(outdir, "harness.wrangler.jsonc");
  writeFileSync(config, harnessConfig(readConfigFile(path.join(PROJECT_ROOT, "wrangler.jsonc"))));
  wrangler(["deploy", "--dry-run", "--outdir", outdir, "-c", config, path.join(PROJECT_ROOT, entry)]);
  return path.join(outdir, `${path.basename(entry, ".ts")}.js`);
}

// The API config's top-level settings that change a bundle, and nothing else.
function harnessConfig(apiConfig: ConfigObject): string {
  const { compatibility_date, compatibility_flags, minify, keep_names } = apiConfig;
  return JSON.stringify({ name: "receipts-v2-harness", compatibility_date, compatibility_flags, minify, keep_names, send_metrics: false }, null, 2);
}
