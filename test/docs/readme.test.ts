/**
 * README.md holds to the code a newcomer runs: its examples pipe cleanly, it lists every route and
 * every setting of the two configs, and it says what the notifier prints without a push address.
 */
import { readFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { readConfigFile } from "../../scripts/lib/config.ts";
import { PATHS } from "../../src/shared/paths.ts";

const ROOT = path.resolve(import.meta.dirname, "../..");
const README = readFileSync(path.join(ROOT, "README.md"), "utf8");

/** The text of a README section, from its heading to the next of its level. */
function section(heading: string): string {
  const start = README.indexOf(`\n## ${heading}\n`);
  expect(start, heading).toBeGreaterThan(0);
  const end = README.indexOf("\n## ", start + 1);
  return README.slice(start, end < 0 ? undefined : end);
}

describe("README.md", () => {
  it("runs every command it shows with --json as npm run -s, so that only the JSON reaches a pipe", () => {
    const loud = README.split("\n").filter((line) => /\bnpm run (?!-s\b)\S+.*\s--json\b/.test(line.replace(/\[[^\]]*--json[^\]]*\]/g, "")));
    expect(loud).toEqual([]);
  });

  it("What it is made of names every route", () => {
    const made = section("What it is made of");
    for (const route of Object.values(PATHS)) expect(made, route).toContain(route);
  });

  it("Configuration names every var, secret and binding of both configs", () => {
    const table = section("Configuration");
    for (const file of ["wrangler.jsonc", "src/notifier/wrangler.jsonc"]) {
      const config = readConfigFile(path.join(ROOT, file)) as Record<string, unknown>;
      const named = (entries: unknown, field: string) => ((entries as Record<string, string>[] | undefined) ?? []).map((entry) => entry[field]!);
      const queues = (config.queues ?? {}) as { producers?: unknown };
      const names = [
        ...Object.keys((config.vars as Record<string, string> | undefined) ?? {}),
        ...((config.secrets as { required?: string[] } | undefined)?.required ?? []),
        ...named(config.kv_namespaces, "binding"),
        ...named(config.r2_buckets, "binding"),
        ...named(config.workflows, "binding"),
        ...named(config.ratelimits, "name"),
        ...named(config.analytics_engine_datasets, "binding"),
        ...named(queues.producers, "binding"),
      ];
      for (const name of names) expect(table, `${file}: ${name}`).toContain(`\`${name}\``);
      for (const shard of named(config.d1_databases, "binding")) expect(table, `${file}: ${shard}`).toContain(shard);
    }
  });

  it("says the notifier logs a notice as outcome logged without APP_PUSH_URL, as it does", () => {
    expect(readFileSync(path.join(ROOT, "src/notifier/deliver.ts"), "utf8")).toContain('outcome: "logged"');
    expect(section("The first request: issue a client and call each endpoint")).toContain('"outcome":"logged"');
  });
});
