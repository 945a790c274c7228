/**
 * The `.dev.vars` files beside each Worker's wrangler config (docs/api.md#local-use): local
 * settings and secrets in dotenv form, `NAME='value'` per line. `npm start` writes them, and the
 * operator scripts read a local secret from them (the deployed one cannot be read back).
 */
import { existsSync, readFileSync, writeFileSync, appendFileSync } from "node:fs";

const LINE = /^\s*([A-Z_][A-Z0-9_]*)\s*=\s*(?:'([^']*)'|"([^"]*)"|(.*?))\s*$/;

/** The settings a `.dev.vars` file holds; an absent file holds none. */
export function readDevVars(file: string): Record<string, string> {
  if (!existsSync(file)) return {};
  const settings: Record<string, string> = {};
  for (const line of readFileSync(file, "utf8").split("\n")) {
    const match = LINE.exec(line);
    if (match && !line.trimStart().startsWith("#")) settings[match[1]!] = match[2] ?? match[3] ?? match[4] ?? "";
  }
  return settings;
}

/**
 * Makes sure a `.dev.vars` file holds each setting: a missing file is written with `header`
 * (comment lines) and every setting; an existing one gets only the settings it lacks, so a
 * developer's own values stay. Returns the names written.
 */
export function ensureDevVars(file: string, header: string, settings: Record<string, () => string>): string[] {
  const present = readDevVars(file);
  const missing = Object.keys(settings).filter((name) => !(name in present));
  if (missing.length === 0) return [];
  const lines = missing.map((name) => `${name}='${settings[name]!()}'\n`).join("");
  if (existsSync(file)) appendFileSync(file, lines);
  else writeFileSync(file, `${header}${lines}`, { mode: 0o600 });
  return missing;
}

/** A Standard Webhooks signing secret, the notifier's APP_PUSH_SECRET: whsec_ and 32 random bytes in base64. */
export function newPushSecret(): string {
  return `whsec_${Buffer.from(crypto.getRandomValues(new Uint8Array(32))).toString("base64")}`;
}
