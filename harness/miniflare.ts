/**
 * What both harnesses (bench, soak) need to run the built Workers in one Miniflare driven from
 * Node: the wrangler configs whose bindings they take, a Worker's options for a ready bundle, the
 * migrations on every shard, and clients issued straight into KV.
 */
import { readFileSync, readdirSync } from "node:fs";
import path from "node:path";
import type { Miniflare } from "miniflare";
import { unstable_splitSqlQuery, type SourcelessWorkerOptions } from "wrangler";
import { PROJECT_ROOT } from "../scripts/lib/wrangler.ts";
import { newClientRecord } from "../src/shared/client-records.ts";
import { APP_SCOPE, clientKey } from "../src/shared/types.ts";

/** The API Worker's wrangler config: its bindings, vars and shards. */
export const API_CONFIG = path.join(PROJECT_ROOT, "wrangler.jsonc");
/** The notifier's wrangler config. */
export const NOTIFIER_CONFIG = path.join(PROJECT_ROOT, "src/notifier/wrangler.jsonc");
/** Every socket of a harness listens here only. */
export const LOOPBACK = "127.0.0.1";
const MIGRATIONS = path.join(PROJECT_ROOT, "migrations");

/** A client issued into a harness's KV, with the secret only the harness knows. */
export interface HarnessClient {
  clientId: string;
  secret: string;
  chainId: string;
}

/** Issues a client for one chain into the CLIENTS namespace, as `npm run clients -- issue` (and `tier`) would. */
export async function issueClient(
  kv: Awaited<ReturnType<Miniflare["getKVNamespace"]>>,
  clientId: string,
  chainId: string,
  tier?: "large" | "xlarge",
): Promise<HarnessClient> {
  const { record, secret } = await newClientRecord({ client_id: clientId, chains: [chainId] });
  await kv.put(clientKey(clientId), JSON.stringify({ ...record, ...(tier && { rate_tier: tier }) }));
  return { clientId, secret, chainId };
}

/** Issues the app push service's client (scope service.app, no chains), as `issue --app` would. */
export async function issueAppClient(
  kv: Awaited<ReturnType<Miniflare["getKVNamespace"]>>,
  clientId: string,
): Promise<{ clientId: string; secret: string }> {
  const { record, secret } = await newClientRecord({ client_id: clientId, chains: [], scopes: [APP_SCOPE] });
  await kv.put(clientKey(clientId), JSON.stringify(record));
  return { clientId, secret };
}

/**
 * A Worker's options from its wrangler config, running a script that is already one bundled
 * file: no module rules apply, and module names are relative to the bundle's own folder.
 */
export function bundled(options: SourcelessWorkerOptions, name: string, scriptPath: string) {
  const { modulesRules: _rules, ...rest } = options;
  return { ...rest, name, modules: true, scriptPath, modulesRoot: path.dirname(scriptPath) };
}

/** Applies migrations/*.sql in order, split into statements the way wrangler splits them. */
export async function applyMigrations(db: Awaited<ReturnType<Miniflare["getD1Database"]>>): Promise<void> {
  const files = readdirSync(MIGRATIONS).filter((file) => file.endsWith(".sql")).sort();
  for (const file of files) {
    const statements = unstable_splitSqlQuery(readFileSync(path.join(MIGRATIONS, file), "utf8"));
    await db.batch(statements.map((sql) => db.prepare(sql)));
  }
}
