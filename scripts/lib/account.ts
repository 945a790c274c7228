/**
 * What a Cloudflare account already holds, read through wrangler's own list commands, for the
 * deploy's plan (scripts/lib/deploy-plan.ts). Each listing's text is parsed by a function of its
 * own, so the tests feed them wrangler's output as fixtures; only {@link readAccount} runs wrangler.
 */
import type { DeployConfigs, Existing, ExistingStore, Jurisdiction } from "./deploy-plan.ts";
import { JURISDICTIONS } from "./deploy-plan.ts";

/** Runs wrangler with these arguments and returns its standard output; throws on failure. */
export type Wrangler = (args: string[]) => string;

/** `wrangler d1 list --json`: each database's name, uuid and, where the API gives it, its jurisdiction. */
export function parseD1List(json: string): ExistingStore[] {
  return (JSON.parse(json) as { name: string; uuid: string; jurisdiction?: string | null }[]).map((db) => ({
    name: db.name,
    id: db.uuid,
    ...("jurisdiction" in db ? { jurisdiction: db.jurisdiction || null } : {}),
  }));
}

/** `wrangler kv namespace list` (JSON): each namespace's title and id. */
export function parseKvList(json: string): ExistingStore[] {
  return (JSON.parse(json) as { id: string; title: string }[]).map((ns) => ({ name: ns.title, id: ns.id }));
}

/** `wrangler r2 bucket list [--jurisdiction <j>]`: `name: <bucket>` lines, every one in that jurisdiction. */
export function parseR2List(text: string, jurisdiction: Jurisdiction | null): ExistingStore[] {
  return [...text.matchAll(/^name:\s+(\S+)\s*$/gm)].map((match) => ({ name: match[1]!, jurisdiction }));
}

/**
 * `wrangler queues list`: a table whose header names the columns; a jurisdiction column appears
 * once any queue has one, and an empty cell there is the default jurisdiction.
 */
export function parseQueuesList(text: string): ExistingStore[] {
  const rows = text
    .split("\n")
    .filter((line) => line.trimStart().startsWith("│"))
    .map((line) => line.split("│").slice(1, -1).map((cell) => cell.trim()));
  const [header, ...body] = rows;
  if (!header) return [];
  const column = (name: string) => header.indexOf(name);
  const [id, name, jurisdiction] = [column("id"), column("name"), column("jurisdiction")];
  return body.map((row) => ({
    name: row[name]!,
    id: row[id],
    jurisdiction: jurisdiction < 0 ? null : row[jurisdiction] || null,
  }));
}

/** `wrangler d1 migrations list <db> --remote`: the migration files it has yet to apply. */
export function parsePendingMigrations(text: string): string[] {
  return [...new Set([...text.matchAll(/\b(\d{4}_[\w.-]+\.sql)\b/g)].map((match) => match[1]!))];
}

/**
 * Whether `wrangler deployments status --name <worker>` failed because the Worker does not exist
 * (the API's error 10007), as opposed to any other failure, which must stop the deploy.
 */
export function isMissingWorker(message: string): boolean {
  return /\b10007\b|does not exist|not found/i.test(message);
}

/**
 * What the account holds that the configs name: every list the plan needs, each existing shard's
 * pending migrations, and which Workers are deployed. Read-only.
 */
export function readAccount(wrangler: Wrangler, configs: DeployConfigs): Existing {
  const d1 = parseD1List(wrangler(["d1", "list", "--json"]));
  const kv = parseKvList(wrangler(["kv", "namespace", "list"]));
  const r2 = [
    ...parseR2List(wrangler(["r2", "bucket", "list"]), null),
    ...JURISDICTIONS.flatMap((jurisdiction) => parseR2List(wrangler(["r2", "bucket", "list", "--jurisdiction", jurisdiction]), jurisdiction)),
  ];
  const queues = parseQueuesList(wrangler(["queues", "list"]));
  const shards = (configs.api.config.d1_databases as { database_name: string }[] | undefined) ?? [];
  const pending = Object.fromEntries(
    shards
      .filter(({ database_name }) => d1.some((db) => db.name === database_name))
      .map(({ database_name }) => [
        database_name,
        parsePendingMigrations(wrangler(["d1", "migrations", "list", database_name, "--remote", "-c", configs.api.file])),
      ]),
  );
  const workers = [configs.notifier, configs.api].flatMap(({ config }) => {
    const name = String(config.name);
    try {
      wrangler(["deployments", "status", "--json", "--name", name]);
      return [name];
    } catch (error) {
      if (isMissingWorker((error as Error).message)) return [];
      throw error;
    }
  });
  return { d1, kv, r2, queues, workers, pending };
}

/** The id `wrangler kv namespace create` printed in its config snippet (TOML or JSON). */
export function createdNamespaceId(output: string): string {
  const match = /"?id"?\s*[=:]\s*"([0-9a-f]{32})"/i.exec(output);
  if (!match) throw new Error(`wrangler kv namespace create printed no id:\n${output}`);
  return match[1]!;
}
