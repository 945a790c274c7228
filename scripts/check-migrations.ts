/**
 * CI's check of new migrations (docs/storage.md "Migrations while the service runs"): exit 1 when
 * a migration added since `--base` (default the previous commit) drops or renames a table, a view
 * or a column that the code at `--base` reads, since that code runs against the new schema between
 * a release's migration and its deploy.
 */
import { readFileSync } from "node:fs";
import path from "node:path";
import { UsageError, parse, runCli } from "./lib/cli.ts";
import { breakingMigrations, describeBreaking, newMigrations } from "./lib/migration-check.ts";
import { PROJECT_ROOT } from "./lib/wrangler.ts";

const USAGE = `Usage: npm run check-migrations -- [--base <ref>] [--root <dir>]

  Fails (exit 1) when a migration added since <ref> drops or renames a table, a view or a
  column that the code (src/) at <ref> still reads. <ref> defaults to HEAD~1, the previous
  commit; a release names the commit it replaces. --root checks another checkout.`;

await runCli(USAGE, (argv) => {
  const { values, positionals } = parse(argv, { base: { type: "string" }, root: { type: "string" } });
  if (positionals.length > 0) throw new UsageError(`Unexpected argument: ${positionals[0]}`);
  const root = path.resolve(values.root ?? PROJECT_ROOT);
  const base = values.base ?? "HEAD~1";
  const added = newMigrations(root, base);
  const breaking = breakingMigrations(root, base, (file) => readFileSync(path.join(root, file), "utf8"));
  if (breaking.length > 0) throw new Error(breaking.map((each) => describeBreaking(each, base)).join("\n"));
  console.log(
    added.length === 0
      ? `No migration added since ${base}.`
      : `${added.length} migration(s) added since ${base} (${added.join(", ")}) keep what the code at ${base} reads.`,
  );
});
