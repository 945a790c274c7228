/**
 * The browser of the API reference page's test (test/docs/reference-page.test.ts): Debian's
 * `chromium` package, since Playwright's own browser download needs a host this project does not
 * reach. `npm test` makes sure of it before the tests start (scripts/ensure-chromium.ts), so the
 * README's test command passes on a bare machine as it does in CI.
 */
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";

/** Where the tests look for Chromium: `CHROMIUM_PATH`, else Debian's binary. */
export function chromiumPath(): string {
  return process.env.CHROMIUM_PATH || "/usr/bin/chromium";
}

/**
 * Installs Debian's `chromium` when it is missing and the machine allows it (root, with
 * apt-get), its output shown. Returns undefined once Chromium is there, else the one line that
 * says what to install.
 */
export function ensureChromium(): string | undefined {
  const binary = chromiumPath();
  if (existsSync(binary)) return undefined;
  const remedy = "install Debian's chromium (as root: apt-get update && apt-get install -y chromium), or set CHROMIUM_PATH to a Chromium binary";
  // A path named on purpose is never replaced by an install elsewhere.
  if (process.env.CHROMIUM_PATH) return `npm test: CHROMIUM_PATH names ${binary}, which does not exist: ${remedy}.`;
  const canInstall = process.getuid?.() === 0 && spawnSync("apt-get", ["--version"], { stdio: "ignore" }).status === 0;
  if (!canInstall) return `npm test needs Chromium at ${binary} for the API reference page's test: ${remedy}.`;

  console.log(`npm test: no Chromium at ${binary}; installing Debian's chromium with apt-get (once).`);
  const env = { ...process.env, DEBIAN_FRONTEND: "noninteractive" };
  for (const args of [["update", "-q"], ["install", "-y", "-q", "chromium"]]) {
    const result = spawnSync("apt-get", args, { stdio: "inherit", env });
    if (result.status !== 0) return `npm test: apt-get ${args[0]} failed (status ${result.status ?? result.signal}): ${remedy}.`;
  }
  return existsSync(binary) ? undefined : `npm test: apt-get installed chromium, but there is still no ${binary}: set CHROMIUM_PATH to its binary.`;
}
