/**
 * `npm run deploy` (docs/operations.md "Deploy from zero"): from an account that is only logged in
 * to a service answering, in one command that is safe to run again. The plan
 * (scripts/lib/deploy-plan.ts) comes from the configs, the migrations, the operator's secrets
 * files and what the account holds; this carries it out in its order and checks the result. With
 * --dry-run it prints the plan and builds both Workers, and needs no account.
 */
import { existsSync, readFileSync, readdirSync } from "node:fs";
import path from "node:path";
import { PATHS } from "../src/shared/paths.ts";
import { createdNamespaceId, readAccount } from "./lib/account.ts";
import { UsageError, parse, positiveInteger, runCli } from "./lib/cli.ts";
import { editConfigText, readConfigFile } from "./lib/config.ts";
import {
  EMPTY_ACCOUNT,
  jurisdictionArgument,
  planDeploy,
  planText,
  type ConfigEdit,
  type DeployConfigs,
  type DeployPlan,
  type Existing,
  type SecretsFile,
} from "./lib/deploy-plan.ts";
import { DEFAULT_ROLLOUT, rollOut, type Probe, type RolloutPolicy } from "./lib/rollout.ts";
import { createdDatabaseId, replaceIfChanged } from "./lib/shards.ts";
import { fetchStatus } from "./lib/status.ts";
import { PROJECT_ROOT, wrangler } from "./lib/wrangler.ts";

const USAGE = `Usage: npm run deploy -- [--dry-run] [--jurisdiction eu|us|fedramp] [--secrets-dir <dir>]
                          [--url <https://…>] [--share <percent>] [--hold <seconds>]

  Everything from a logged-in account (npx wrangler login) to the service answering, and safe
  to run again: creates every store the two configs bind that the account lacks (each shard's
  D1 database, the KV namespaces, the ARCHIVE bucket, the queues) and writes their IDs into
  wrangler.jsonc and src/notifier/wrangler.jsonc; applies each shard's pending migrations;
  deploys the notifier, then the API Worker, with the secrets of <dir>/api.json and
  <dir>/notifier.json (made by npm run keys -- files; never printed); then checks the status
  endpoint and the OpenAPI document at the deployed URL.
  A Worker already deployed goes out as a new version to --share percent (default ${DEFAULT_ROLLOUT.share}) for
  --hold seconds (default ${DEFAULT_ROLLOUT.holdSeconds}) while its status stays healthy, then to all traffic;
  unhealthy, both Workers go back to their versions and the command says why. This needs an
  ops client: RECEIPTS_OPS_CLIENT_ID and RECEIPTS_OPS_CLIENT_SECRET (npm run clients -- issue --ops --remote).

  --dry-run        print every step (each wrangler command, each store to create, each shard's
                   migrations) and build both Workers; nothing is created, written or deployed.
                   Reads the account when logged in, else plans for an empty one
  --jurisdiction   where every store that can hold a shopper's data is created (the shards, the
                   bucket, the queues, the Workflows); refused when the account's are elsewhere
  --secrets-dir    the directory of the secrets files (default .secrets)
  --url            the deployed service's address, when not its workers.dev one (RECEIPTS_BASE_URL)`;

const CONFIG_FILES = { notifier: "src/notifier/wrangler.jsonc", api: "wrangler.jsonc" } as const;

await runCli(USAGE, async (argv) => {
  const { values, positionals } = parse(argv, {
    "dry-run": { type: "boolean" },
    jurisdiction: { type: "string" },
    "secrets-dir": { type: "string" },
    url: { type: "string" },
    share: { type: "string" },
    hold: { type: "string" },
  });
  if (positionals.length > 0) throw new UsageError(`Unexpected argument: ${positionals[0]}`);
  const dryRun = values["dry-run"] ?? false;
  let jurisdiction;
  try {
    jurisdiction = values.jurisdiction === undefined ? undefined : jurisdictionArgument(values.jurisdiction);
  } catch (error) {
    throw new UsageError((error as Error).message);
  }
  const policy: RolloutPolicy = {
    ...DEFAULT_ROLLOUT,
    ...(values.share === undefined ? {} : { share: percent(values.share) }),
    ...(values.hold === undefined ? {} : { holdSeconds: positiveInteger("--hold", values.hold) }),
  };
  const secretsDir = values["secrets-dir"] ?? ".secrets";

  const configs = readConfigs();
  const loggedIn = isLoggedIn();
  if (!loggedIn && !dryRun) throw new Error("Not logged in to Cloudflare: run `npx wrangler login` first (or set CLOUDFLARE_API_TOKEN).");
  const existing: Existing = loggedIn ? readAccount((args) => wrangler(args), configs) : EMPTY_ACCOUNT;
  const plan = planDeploy({
    configs,
    migrations: readdirSync(path.join(PROJECT_ROOT, "migrations")).filter((file) => file.endsWith(".sql")).sort(),
    jurisdiction,
    existing,
    secrets: (["notifier", "api"] as const).map((worker) => secretsFile(worker, path.join(secretsDir, `${worker}.json`))),
    rollout: { share: policy.share, holdSeconds: policy.holdSeconds },
  });

  if (dryRun) {
    const builds = plan.workers.map((worker) => build(worker.worker, worker.how));
    console.log(planText(plan, { dryRun, rollout: policy, builds }));
    if (!loggedIn) console.log("\n(Not logged in: planned for an empty account. Logged in, the plan starts from what the account holds.)");
    if (plan.refusals.length > 0) throw new Error(`A deploy would be refused:\n${plan.refusals.join("\n")}`);
    return;
  }
  const problems = [...plan.refusals, ...plan.secrets.flatMap((secret) => secret.problem ?? [])];
  if (plan.workers.some((worker) => worker.how === "rollout") && !opsClient()) {
    problems.push("A rollout probes the new version's status as an ops client: set RECEIPTS_OPS_CLIENT_ID and RECEIPTS_OPS_CLIENT_SECRET (npm run clients -- issue --ops --remote).");
  }
  if (problems.length > 0) throw new Error(`Refused, nothing done:\n${problems.join("\n")}`);
  console.log(planText(plan, { dryRun, rollout: policy }));
  await carryOut(plan, policy, values.url ?? process.env.RECEIPTS_BASE_URL);
});

function percent(text: string): number {
  const value = Number(text);
  if (!Number.isInteger(value) || value < 1 || value > 99) throw new UsageError(`--share must be a whole percent from 1 to 99, not ${text}`);
  return value;
}

function readConfigs(): DeployConfigs {
  return {
    notifier: { file: CONFIG_FILES.notifier, config: readConfigFile(path.join(PROJECT_ROOT, CONFIG_FILES.notifier)) },
    api: { file: CONFIG_FILES.api, config: readConfigFile(path.join(PROJECT_ROOT, CONFIG_FILES.api)) },
  };
}

/** The names a secrets file holds, never its values; none when it is missing or not a JSON object. */
function secretsFile(worker: SecretsFile["worker"], file: string): SecretsFile {
  const full = path.resolve(PROJECT_ROOT, file);
  if (!existsSync(full)) return { worker, file };
  try {
    const parsed = JSON.parse(readFileSync(full, "utf8")) as unknown;
    if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) return { worker, file };
    return { worker, file, names: Object.keys(parsed).filter((name) => typeof (parsed as Record<string, unknown>)[name] === "string") };
  } catch {
    return { worker, file };
  }
}

function isLoggedIn(): boolean {
  try {
    return (JSON.parse(wrangler(["whoami", "--json"])) as { loggedIn?: boolean }).loggedIn === true;
  } catch {
    return false;
  }
}

/** A Worker bundled as its deploy would upload it (`--dry-run`), into dist/<worker>; the line the plan prints. */
function build(worker: keyof DeployConfigs, how: "deploy" | "rollout"): string {
  const outdir = path.join(PROJECT_ROOT, "dist", worker);
  const verb = how === "deploy" ? ["deploy"] : ["versions", "upload"];
  const output = wrangler([...verb, "--dry-run", "-c", CONFIG_FILES[worker], "--outdir", outdir]);
  const size = /Total Upload: ([^\n]+)/.exec(output)?.[1] ?? "?";
  return `${CONFIG_FILES[worker]}: npx wrangler ${verb.join(" ")} --dry-run: ${path.relative(PROJECT_ROOT, outdir)}/index.js, ${size}`;
}

function opsClient(): { id: string; secret: string } | undefined {
  const { RECEIPTS_OPS_CLIENT_ID: id, RECEIPTS_OPS_CLIENT_SECRET: secret } = process.env;
  return id && secret ? { id, secret } : undefined;
}

/** The plan, done in its order; ends with the check's report. */
async function carryOut(plan: DeployPlan, policy: RolloutPolicy, givenUrl: string | undefined): Promise<void> {
  const ids = new Map<string, string>();
  for (const resource of plan.resources) {
    const key = `${resource.kind}:${resource.name}`;
    if (resource.create) {
      console.log(`Creating ${resource.kind} ${resource.name}...`);
      const output = wrangler(resource.create);
      if (resource.kind === "d1") ids.set(key, createdDatabaseId(output));
      if (resource.kind === "kv") ids.set(key, createdNamespaceId(output));
    } else if (resource.found?.id) {
      ids.set(key, resource.found.id);
    }
  }
  for (const file of new Set(plan.edits.map((edit) => edit.file))) {
    const full = path.join(PROJECT_ROOT, file);
    const text = plan.edits.filter((edit) => edit.file === file).reduce((current, edit) => editConfigText(current, edit.at, editValue(edit, ids)), readFileSync(full, "utf8"));
    replaceIfChanged(full, text);
  }
  for (const migration of plan.migrations.filter((each) => each.pending.length > 0)) {
    console.log(`Migrating ${migration.shard} (${migration.pending.length} pending)...`);
    wrangler(migration.args);
  }
  let deployedUrl: string | undefined;
  for (const worker of plan.workers.filter((each) => each.how === "deploy")) {
    console.log(`Deploying ${worker.name}...`);
    const output = wrangler(worker.args);
    // The API Worker's own address: the notifier's workers.dev one answers nothing of the API.
    if (worker.worker === "api") deployedUrl = /https:\/\/[\w.-]+\.workers\.dev/.exec(output)?.[0];
  }
  const baseUrl = givenUrl ?? deployedUrl;
  const rolling = plan.workers.filter((each) => each.how === "rollout");
  if (rolling.length > 0) {
    if (!baseUrl) throw new Error("A rollout probes the service: give its address with --url (or RECEIPTS_BASE_URL).");
    const client = opsClient()!;
    const apiName = plan.workers.find((worker) => worker.worker === "api")!.name;
    await rollOut(rolling, policy, {
      wrangler: (args) => wrangler(args),
      probe: (version) => probeStatus(baseUrl, client, version && `${apiName}="${version}"`),
      sleep: (ms) => new Promise((resolve) => setTimeout(resolve, ms)),
      now: () => Date.now(),
      log: (line) => console.log(line),
    });
  }
  console.log(baseUrl ? await checkReport(baseUrl) : "Deployed. Check skipped: give the service's address with --url to check it.");
}

/** The value an edit writes: its own, or the ID the account gave its store (an edit must never remove a field). */
function editValue(edit: ConfigEdit, ids: ReadonlyMap<string, string>): string {
  if (typeof edit.value === "string") return edit.value;
  const id = ids.get(edit.value.idOf);
  if (id === undefined) throw new Error(`No ID for ${edit.value.idOf}, which ${edit.file} binds: nothing was written to it.`);
  return id;
}

/** The status, as the ops client reads it; `override` pins the request to one version of the API Worker. */
async function probeStatus(baseUrl: string, client: { id: string; secret: string }, override?: string): Promise<Probe> {
  const fetcher: typeof fetch = (input, init) =>
    fetch(input, override ? { ...init, headers: { ...(init?.headers as Record<string, string>), "Cloudflare-Workers-Version-Overrides": override } } : init);
  try {
    return { status: await fetchStatus(baseUrl, client.id, client.secret, fetcher) };
  } catch (error) {
    return { failure: (error as Error).message };
  }
}

/** The deployed service's check: its OpenAPI document and its status, in a few lines. */
async function checkReport(baseUrl: string): Promise<string> {
  const lines = [`Check of ${baseUrl}:`];
  try {
    const answer = await fetch(new URL(PATHS.openapi, baseUrl));
    const document = (await answer.json()) as { openapi?: string; info?: { version?: string } };
    lines.push(`  ${PATHS.openapi}: ${answer.status}${document.openapi ? `, OpenAPI ${document.openapi}, version ${document.info?.version ?? "?"}` : ", not an OpenAPI document"}`);
  } catch (error) {
    lines.push(`  ${PATHS.openapi}: no answer (${(error as Error).message})`);
  }
  const client = opsClient();
  if (client) {
    const probe = await probeStatus(baseUrl, client);
    lines.push(
      "status" in probe
        ? `  ${PATHS.status}: ${probe.status.data.healthy ? "healthy" : `UNHEALTHY: ${probe.status.data.reasons.map((reason) => reason.code).join(", ")}`}`
        : `  ${PATHS.status}: ${probe.failure}`,
    );
  } else {
    const answer = await fetch(new URL(PATHS.status, baseUrl)).catch((error: Error) => error);
    if (answer instanceof Response) await answer.body?.cancel();
    lines.push(
      `  ${PATHS.status}: ${answer instanceof Response ? `${answer.status} without a token (serving)` : `no answer (${answer.message})`}; ` +
        "its health needs an ops client: npm run clients -- issue --ops --remote, then npm run status -- --remote",
    );
  }
  return lines.join("\n");
}
