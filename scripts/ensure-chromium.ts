/**
 * `npm test`'s first step (package.json "pretest"): the API reference page's test needs Debian's
 * `chromium`; this installs it where the machine allows, or stops the run at once with the one
 * line that says what to install (scripts/lib/chromium.ts).
 */
import { ensureChromium } from "./lib/chromium.ts";

const problem = ensureChromium();
if (problem) {
  console.error(problem);
  process.exit(1);
}
