/**
 * `npm run deploy` decided before anything is done (docs/operations.md "Deploy from zero"): from
 * the two Workers' configs, the migrations, the operator's secrets files and what the account
 * already holds, every step in order: the resources to create (or found), the IDs written into the
 * configs, each shard's pending migrations, the secrets, the notifier's deploy before the API
 * Worker's, and the check of the deployed service. A pure function of its inputs, so that a dry
 * run prints exactly what a real run does, the tests check the plan against the configs, and a
 * run again on a deployed service plans only what changed.
 */
import { shardNameOfBinding } from "../../src/shared/shard-ids.ts";
import { BINDINGS, NOT_PERSONAL } from "../../src/storage/personal-data.ts";
import { PATHS } from "../../src/shared/paths.ts";
import type { ConfigObject } from "./config.ts";

/** The jurisdictions wrangler creates D1 databases, R2 buckets and queues in. */
export const JURISDICTIONS = ["eu", "us", "fedramp"] as const;
export type Jurisdiction = (typeof JURISDICTIONS)[number];

/** One Worker's config as the deploy reads it: its path relative to the project, and its content. */
export interface WorkerConfig {
  file: string;
  config: ConfigObject;
}

/** The two Workers, the notifier first: it is deployed first, since it only reads what the API Worker writes. */
export interface DeployConfigs {
  notifier: WorkerConfig;
  api: WorkerConfig;
}

/** A store as the account lists it; `jurisdiction` is null for the default one, undefined when the listing does not say. */
export interface ExistingStore {
  name: string;
  id?: string;
  jurisdiction?: string | null;
}

/**
 * What the account holds, as scripts/lib/account.ts reads it through wrangler (or a test's
 * fixture). `pending` is each existing database's unapplied migrations (`wrangler d1 migrations
 * list --remote`); a database missing from it has every migration pending.
 */
export interface Existing {
  d1: ExistingStore[];
  kv: ExistingStore[];
  r2: ExistingStore[];
  queues: ExistingStore[];
  /** The Workers that have a deployment already: these go out by a gradual rollout. */
  workers: string[];
  pending: Record<string, string[]>;
}

/** An account with nothing in it: the dry run's answer when no account is logged in. */
export const EMPTY_ACCOUNT: Existing = { d1: [], kv: [], r2: [], queues: [], workers: [], pending: {} };

/** A secrets file the operator keeps (made by `npm run keys -- files`), as found on disk. */
export interface SecretsFile {
  worker: keyof DeployConfigs;
  file: string;
  /** The names the file holds; undefined when it does not exist or cannot be read. */
  names?: string[];
}

/** The secrets each Worker needs, the names its config lists under `secrets.required`. */
export function requiredSecrets(config: ConfigObject): string[] {
  const secrets = config.secrets as { required?: unknown } | undefined;
  return Array.isArray(secrets?.required) ? secrets.required.filter((name): name is string => typeof name === "string") : [];
}

type ResourceKind = "d1" | "kv" | "r2" | "queue";

/** A resource a binding of either config needs, found in the account or to be created. */
export interface PlannedResource {
  kind: ResourceKind;
  name: string;
  /** Every binding that uses it, as `<config file> <binding>` (a queue: its producers and consumers). */
  usedBy: string[];
  /** Whether it can hold a shopper's data: such a store is created in the deployment's jurisdiction. */
  personal: boolean;
  /** The jurisdiction it is created in: the deployment's, for a store that can hold a shopper's data. */
  jurisdiction?: Jurisdiction;
  /** Its ID in the account when it exists (a bucket and a queue are named, not numbered). */
  found?: { id?: string };
  /** The wrangler arguments that create it when it does not. */
  create?: string[];
}

/** A value the deploy writes into a config, a JSONC edit that leaves the rest of the file alone. */
export interface ConfigEdit {
  file: string;
  at: (string | number)[];
  /** The value, or the resource whose ID it is once created. */
  value: string | { idOf: string };
}

/** A shard's database and the migrations it lacks. */
export interface PlannedMigration {
  shard: string;
  database: string;
  pending: string[];
  args: string[];
}

/** A Worker's way out: a first deploy, or a new version rolled out gradually beside the current one. */
export interface PlannedWorker {
  worker: keyof DeployConfigs;
  name: string;
  file: string;
  secretsFile: string;
  how: "deploy" | "rollout";
  args: string[];
}

/** Everything a deploy does, in order, or why it refuses to start. */
export interface DeployPlan {
  jurisdiction?: Jurisdiction;
  resources: PlannedResource[];
  edits: ConfigEdit[];
  migrations: PlannedMigration[];
  secrets: { worker: keyof DeployConfigs; file: string; problem?: string }[];
  workers: PlannedWorker[];
  checks: string[];
  /** Reasons the deploy must not run (a store in another jurisdiction, a config bound to another database); empty when it may. */
  refusals: string[];
}

/** The names of the bindings whose store can hold a shopper's data besides the shards: the personal-data map's. */
export function personalBindings(): Set<string> {
  return new Set(Object.entries(BINDINGS).flatMap(([binding, places]) => (places === NOT_PERSONAL ? [] : [binding])));
}

/** A KV namespace's title in the account: the service's prefix and the binding, as `receipts-v2-shard-states`. */
export function kvTitle(binding: string): string {
  return `receipts-v2-${binding.toLowerCase().replaceAll("_", "-")}`;
}

/**
 * The jurisdiction the configs record for the deployment (the deploy writes it on the ARCHIVE
 * bucket's and the Workflows' bindings), or undefined for the default one; two different ones
 * are an error.
 */
export function configJurisdiction(configs: readonly ConfigObject[]): Jurisdiction | undefined {
  const found = new Set<string>();
  for (const config of configs) {
    for (const table of ["r2_buckets", "workflows"] as const) {
      for (const entry of entries(config, table)) if (typeof entry.jurisdiction === "string") found.add(entry.jurisdiction);
    }
  }
  if (found.size > 1) throw new Error(`The configs record more than one jurisdiction (${[...found].join(", ")}): fix them by hand first.`);
  const [only] = found;
  return only === undefined ? undefined : jurisdictionArgument(only);
}

/** Checks a `--jurisdiction` value. */
export function jurisdictionArgument(value: string): Jurisdiction {
  if (!(JURISDICTIONS as readonly string[]).includes(value)) {
    throw new Error(`Not a jurisdiction: ${JSON.stringify(value)} (one of ${JURISDICTIONS.join(", ")}).`);
  }
  return value as Jurisdiction;
}

/** The plan's inputs. */
export interface PlanInput {
  configs: DeployConfigs;
  /** The migration files, in the order wrangler applies them. */
  migrations: string[];
  /** `--jurisdiction`; the configs' own when not given. */
  jurisdiction?: Jurisdiction;
  existing: Existing;
  secrets: SecretsFile[];
  /** The share of traffic a new version gets first, and how long it is held there, in seconds. */
  rollout: { share: number; holdSeconds: number };
}

/** The deploy's plan; see {@link DeployPlan}. */
export function planDeploy(input: PlanInput): DeployPlan {
  const { configs, existing } = input;
  const refusals: string[] = [];
  const recorded = configJurisdiction([configs.notifier.config, configs.api.config]);
  if (input.jurisdiction !== undefined && recorded !== undefined && input.jurisdiction !== recorded) {
    refusals.push(`The configs record the deployment in ${recorded}, not ${input.jurisdiction}: a deployment cannot move; deploy with --jurisdiction ${recorded}.`);
  }
  const jurisdiction = input.jurisdiction ?? recorded;
  const personal = personalBindings();

  const resources = new Map<string, PlannedResource>();
  const need = (kind: ResourceKind, name: string, usedBy: string, personal: boolean) => {
    const key = `${kind}:${name}`;
    const resource = resources.get(key) ?? { kind, name, usedBy: [], personal, ...(personal && jurisdiction ? { jurisdiction } : {}) };
    resource.usedBy.push(usedBy);
    resources.set(key, resource);
  };
  const edits: ConfigEdit[] = [];
  for (const { file, config } of [configs.notifier, configs.api]) {
    entries(config, "d1_databases").forEach((entry, index) => {
      const binding = String(entry.binding);
      const database = String(entry.database_name);
      need("d1", database, `${file} ${binding}`, true);
      edits.push({ file, at: ["d1_databases", index, "database_id"], value: { idOf: `d1:${database}` } });
    });
    entries(config, "kv_namespaces").forEach((entry, index) => {
      const binding = String(entry.binding);
      need("kv", kvTitle(binding), `${file} ${binding}`, personal.has(binding));
      edits.push({ file, at: ["kv_namespaces", index, "id"], value: { idOf: `kv:${kvTitle(binding)}` } });
    });
    entries(config, "r2_buckets").forEach((entry, index) => {
      const binding = String(entry.binding);
      need("r2", String(entry.bucket_name), `${file} ${binding}`, personal.has(binding));
      if (jurisdiction && personal.has(binding)) edits.push({ file, at: ["r2_buckets", index, "jurisdiction"], value: jurisdiction });
    });
    const queues = (config.queues ?? {}) as { producers?: Record<string, unknown>[]; consumers?: Record<string, unknown>[] };
    for (const producer of queues.producers ?? []) need("queue", String(producer.queue), `${file} ${String(producer.binding)}`, true);
    for (const consumer of queues.consumers ?? []) {
      need("queue", String(consumer.queue), `${file} consumer`, true);
      if (typeof consumer.dead_letter_queue === "string") need("queue", consumer.dead_letter_queue, `${file} dead letters of ${String(consumer.queue)}`, true);
    }
    // A Workflow's instances hold what their steps return (an app user's receipts, in an export):
    // created by the deploy itself, in the jurisdiction its binding names.
    if (jurisdiction) entries(config, "workflows").forEach((_entry, index) => edits.push({ file, at: ["workflows", index, "jurisdiction"], value: jurisdiction }));
  }

  for (const resource of resources.values()) {
    const found = lookup(existing, resource, jurisdiction);
    if (found) {
      resource.found = found.id === undefined ? {} : { id: found.id };
      // A listing that does not say (undefined) cannot refuse; the default jurisdiction is null.
      const actual = found.jurisdiction;
      const wanted = resource.jurisdiction ?? null;
      if (resource.personal && actual !== undefined && actual !== wanted) {
        refusals.push(
          `${label(resource)} exists in ${actual ?? "the default jurisdiction"}, not ${wanted ?? "the default jurisdiction"}: ` +
            (actual ? `deploy with --jurisdiction ${actual}, or delete it first.` : `this deployment's stores are not in ${wanted}; a deployment cannot move.`),
        );
      }
    } else {
      resource.create = createArgs(resource);
    }
  }
  // An ID a config already holds must be the account's, or the Worker would bind another store.
  for (const edit of edits) {
    if (typeof edit.value === "string") continue;
    const resource = resources.get(edit.value.idOf)!;
    const current = valueAt(configsByFile(configs)[edit.file]!, edit.at);
    if (typeof current === "string" && resource.found?.id !== undefined && current !== resource.found.id) {
      refusals.push(`${edit.file} binds ${label(resource)} by id ${current}, but the account's is ${resource.found.id}: remove the id from ${edit.file} to take the account's.`);
    }
    if (typeof current === "string" && resource.create) {
      refusals.push(`${edit.file} binds ${label(resource)} by id ${current}, which the account does not hold: remove that id, and the deploy creates the database.`);
    }
  }

  const shards = entries(configs.api.config, "d1_databases").filter((entry) => shardNameOfBinding(String(entry.binding)));
  const notifierShards = new Set(entries(configs.notifier.config, "d1_databases").map((entry) => String(entry.binding)));
  for (const entry of shards) {
    if (!notifierShards.has(String(entry.binding))) refusals.push(`${configs.notifier.file} does not bind ${String(entry.binding)}: both Workers bind every shard (npm run shards -- add writes both).`);
  }
  const migrations = shards.map((entry) => {
    const database = String(entry.database_name);
    const found = resources.get(`d1:${database}`)?.found;
    return {
      shard: shardNameOfBinding(String(entry.binding))!,
      database,
      pending: found ? (existing.pending[database] ?? input.migrations) : input.migrations,
      args: ["d1", "migrations", "apply", database, "--remote", "-c", configs.api.file],
    };
  });

  const secrets = input.secrets.map(({ worker, file, names }) => {
    const required = requiredSecrets(configs[worker].config);
    const problem =
      names === undefined
        ? `Missing ${file} (${required.join(", ")}): make it with \`npm run keys -- files --push-url <the app push service's URL>\`.`
        : required.some((name) => !names.includes(name))
          ? `${file} lacks ${required.filter((name) => !names.includes(name)).join(", ")}: add it, or move the file away and make both again with \`npm run keys -- files\`.`
          : undefined;
    return { worker, file, ...(problem ? { problem } : {}) };
  });

  const workers = (["notifier", "api"] as const).map((worker): PlannedWorker => {
    const { file, config } = configs[worker];
    const name = String(config.name);
    const secretsFile = input.secrets.find((each) => each.worker === worker)!.file;
    const deployed = existing.workers.includes(name);
    return {
      worker,
      name,
      file,
      secretsFile,
      how: deployed ? "rollout" : "deploy",
      args: deployed
        ? ["versions", "upload", "-c", file, "--secrets-file", secretsFile]
        : ["deploy", "-c", file, "--secrets-file", secretsFile],
    };
  });

  return {
    ...(jurisdiction ? { jurisdiction } : {}),
    resources: [...resources.values()],
    edits,
    migrations,
    secrets,
    workers,
    checks: [PATHS.status, PATHS.openapi],
    refusals,
  };
}

/** The plan as a person reads it: one line a step, each wrangler command as it would be typed. */
export function planText(plan: DeployPlan, options: { dryRun: boolean; rollout: PlanInput["rollout"]; builds?: string[] }): string {
  const command = (args: string[]) => `npx wrangler ${args.map((arg) => (/^[\w@./:=<>-]+$/.test(arg) ? arg : JSON.stringify(arg))).join(" ")}`;
  const lines: string[] = [];
  lines.push(`Deploy plan${options.dryRun ? " (dry run: nothing is created, written or deployed)" : ""}, jurisdiction: ${plan.jurisdiction ?? "default"}`);
  if (plan.refusals.length > 0) {
    lines.push("", "Refused:");
    for (const refusal of plan.refusals) lines.push(`  ${refusal}`);
  }
  lines.push("", "1. Resources");
  for (const resource of plan.resources) {
    const where = resource.jurisdiction ? ` in ${resource.jurisdiction}` : "";
    lines.push(
      resource.create
        ? `  create ${label(resource)}${where}: ${command(resource.create)}`
        : `  found  ${label(resource)}${resource.found?.id ? ` (${resource.found.id})` : ""}${where}`,
    );
    lines.push(`         for ${resource.usedBy.join(", ")}`);
  }
  lines.push("", "2. Configs (JSONC edits; comments and layout kept)");
  for (const edit of plan.edits) {
    lines.push(`  ${edit.file}: ${edit.at.join(".")} = ${typeof edit.value === "string" ? JSON.stringify(edit.value) : `the id of ${edit.value.idOf}`}`);
  }
  lines.push("", "3. Migrations, every shard before any deploy");
  for (const migration of plan.migrations) {
    lines.push(
      migration.pending.length === 0
        ? `  ${migration.shard} (${migration.database}): up to date`
        : `  ${migration.shard} (${migration.database}): ${command(migration.args)}\n         applies ${migration.pending.join(", ")}`,
    );
  }
  lines.push("", "4. Secrets, from the files the operator keeps (never printed)");
  for (const secret of plan.secrets) lines.push(`  ${secret.worker}: ${secret.problem ?? `${secret.file}, uploaded with the Worker (--secrets-file)`}`);
  if (options.builds) {
    lines.push("", "5. Builds (wrangler deploy --dry-run)");
    for (const build of options.builds) lines.push(`  ${build}`);
  }
  lines.push("", `${options.builds ? 6 : 5}. Workers, the notifier first`);
  for (const worker of plan.workers) {
    if (worker.how === "deploy") {
      lines.push(`  ${worker.name}: first deploy: ${command(worker.args)}`);
    } else {
      lines.push(`  ${worker.name}: new version: ${command(worker.args)}`);
      lines.push(`         then ${command(["versions", "deploy", "<new>@" + options.rollout.share, `<current>@${100 - options.rollout.share}`, "-y", "-c", worker.file])}`);
    }
  }
  if (plan.workers.some((worker) => worker.how === "rollout")) {
    lines.push(
      `  held ${options.rollout.holdSeconds} s at ${options.rollout.share} % while the new version's status stays healthy, then each at 100 % and`,
      `  ${command(["triggers", "deploy", "-c", "<config>"])} (cron, queue consumers); unhealthy: back to the current versions, saying why`,
    );
  }
  lines.push("", `${options.builds ? 7 : 6}. Check of the deployed service`);
  for (const check of plan.checks) lines.push(`  GET <deployed URL>${check}`);
  return lines.join("\n");
}

/** The wrangler arguments that create a resource, in its jurisdiction when it has one. */
function createArgs(resource: PlannedResource): string[] {
  const where = resource.jurisdiction ? ["--jurisdiction", resource.jurisdiction] : [];
  switch (resource.kind) {
    case "d1":
      return ["d1", "create", resource.name, ...where];
    case "kv":
      return ["kv", "namespace", "create", resource.name, ...where];
    case "r2":
      return ["r2", "bucket", "create", resource.name, ...where];
    case "queue":
      return ["queues", "create", resource.name, ...where];
  }
}

/** The account's store of that kind and name; an R2 bucket's name is its own in each jurisdiction. */
function lookup(existing: Existing, resource: PlannedResource, jurisdiction: Jurisdiction | undefined): ExistingStore | undefined {
  if (resource.kind === "kv") return existing.kv.find((store) => store.name === resource.name);
  if (resource.kind === "r2") {
    const same = existing.r2.filter((store) => store.name === resource.name);
    const wanted = resource.jurisdiction ?? jurisdiction ?? null;
    return same.find((store) => (store.jurisdiction ?? null) === wanted) ?? same[0];
  }
  return (resource.kind === "d1" ? existing.d1 : existing.queues).find((store) => store.name === resource.name);
}

function label(resource: PlannedResource): string {
  const kinds = { d1: "D1 database", kv: "KV namespace", r2: "R2 bucket", queue: "queue" };
  return `${kinds[resource.kind]} ${resource.name}`;
}

function entries(config: ConfigObject, table: string): Record<string, unknown>[] {
  const value = config[table];
  return Array.isArray(value) ? (value as Record<string, unknown>[]) : [];
}

function configsByFile(configs: DeployConfigs): Record<string, ConfigObject> {
  return Object.fromEntries(Object.values(configs).map(({ file, config }) => [file, config]));
}

function valueAt(config: ConfigObject, at: (string | number)[]): unknown {
  return at.reduce<unknown>((value, key) => (value as Record<string | number, unknown> | undefined)?.[key], config);
}

