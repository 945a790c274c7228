/**
 * docs/operations.md "Deploy from zero": `npm run deploy`'s plan checked against the two Workers'
 * configs as they are committed, in-process on fixtures of what an account holds; then the dry
 * run once end to end, as a process without an account.
 */
import { existsSync, readFileSync, readdirSync, statSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import {
  createdNamespaceId,
  isMissingWorker,
  parseD1List,
  parseKvList,
  parsePendingMigrations,
  parseQueuesList,
  parseR2List,
} from "../../scripts/lib/account.ts";
import { readConfigFile } from "../../scripts/lib/config.ts";
import {
  EMPTY_ACCOUNT,
  kvTitle,
  personalBindings,
  planDeploy,
  planText,
  requiredSecrets,
  type DeployConfigs,
  type Existing,
  type PlanInput,
} from "../../scripts/lib/deploy-plan.ts";
import { addJurisdiction } from "../../scripts/lib/shard-commands.ts";
import { wranglerAsync } from "../../scripts/lib/wrangler.ts";
import { shardNameOfBinding } from "../../src/shared/shard-ids.ts";
import { ROOT, runScriptAsync } from "../support/run-script.ts";

const CONFIGS: DeployConfigs = {
  notifier: { file: "src/notifier/wrangler.jsonc", config: readConfigFile(path.join(ROOT, "src/notifier/wrangler.jsonc")) },
  api: { file: "wrangler.jsonc", config: readConfigFile(path.join(ROOT, "wrangler.jsonc")) },
};
const MIGRATIONS = readdirSync(path.join(ROOT, "migrations")).filter((file) => file.endsWith(".sql")).sort();
const SECRETS: PlanInput["secrets"] = [
  { worker: "notifier", file: ".secrets/notifier.json", names: ["APP_PUSH_URL", "APP_PUSH_SECRET"] },
  { worker: "api", file: ".secrets/api.json", names: ["TOKEN_KEYS", "AUDIT_HASH_KEY"] },
];
const ROLLOUT = { share: 10, holdSeconds: 600 };

const plan = (overrides: Partial<PlanInput> = {}) =>
  planDeploy({ configs: CONFIGS, migrations: MIGRATIONS, existing: EMPTY_ACCOUNT, secrets: SECRETS, rollout: ROLLOUT, ...overrides });

type Entry = Record<string, unknown>;
const table = (config: Record<string, unknown>, name: string) => (config[name] as Entry[] | undefined) ?? [];

/** Every binding of both configs that needs a store in the account, as `<file> <binding>`, with the store's kind and name. */
function boundStores(): { usedBy: string; kind: string; name: string }[] {
  return Object.values(CONFIGS).flatMap(({ file, config }) => {
    const queues = (config.queues ?? {}) as { producers?: Entry[]; consumers?: Entry[] };
    return [
      ...table(config, "d1_databases").map((entry) => ({ usedBy: `${file} ${String(entry.binding)}`, kind: "d1", name: String(entry.database_name) })),
      ...table(config, "kv_namespaces").map((entry) => ({ usedBy: `${file} ${String(entry.binding)}`, kind: "kv", name: kvTitle(String(entry.binding)) })),
      ...table(config, "r2_buckets").map((entry) => ({ usedBy: `${file} ${String(entry.binding)}`, kind: "r2", name: String(entry.bucket_name) })),
      ...(queues.producers ?? []).map((entry) => ({ usedBy: `${file} ${String(entry.binding)}`, kind: "queue", name: String(entry.queue) })),
      ...(queues.consumers ?? []).flatMap((entry) => [
        { usedBy: `${file} consumer`, kind: "queue", name: String(entry.queue) },
        ...(entry.dead_letter_queue ? [{ usedBy: `${file} dead letters of ${String(entry.queue)}`, kind: "queue", name: String(entry.dead_letter_queue) }] : []),
      ]),
    ];
  });
}

/** An account holding every store of the configs, both Workers deployed, in `jurisdiction`. */
function deployedAccount(jurisdiction: string | null, pending: Record<string, string[]> = {}): Existing {
  const stores = boundStores();
  const named = (kind: string) => [...new Set(stores.filter((store) => store.kind === kind).map((store) => store.name))];
  return {
    d1: named("d1").map((name, index) => ({ name, id: `00000000-0000-4000-8000-00000000000${index}`, jurisdiction })),
    kv: named("kv").map((name, index) => ({ name, id: `${index}`.padStart(32, "a") })),
    r2: named("r2").map((name) => ({ name, jurisdiction })),
    queues: named("queue").map((name) => ({ name, id: name, jurisdiction })),
    workers: ["receipts-v2-notifier", "receipts-v2-api"],
    pending,
  };
}

describe("docs/operations.md#deploy-from-zero npm run deploy's plan", () => {
  it("on an empty account creates the store of every binding of both configs, once, and writes each ID into each config that binds it", () => {
    const { resources, edits, refusals } = plan();
    expect(refusals).toEqual([]);
    for (const store of boundStores()) {
      const resource = resources.find((each) => each.kind === store.kind && each.name === store.name);
      expect(resource?.usedBy, `${store.usedBy}: ${store.kind} ${store.name}`).toContain(store.usedBy);
      expect(resource!.create).toBeDefined();
    }
    expect(new Set(resources.map((each) => `${each.kind}:${each.name}`)).size).toBe(resources.length);
    // The three queues, the bucket, both namespaces and every shard's database.
    expect(resources.filter((each) => each.kind === "queue").map((each) => each.name).sort()).toEqual(["receipts-v2-notices", "receipts-v2-notices-failed", "receipts-v2-sweeps"]);
    for (const { file, config } of Object.values(CONFIGS)) {
      table(config, "d1_databases").forEach((_entry, index) => expect(edits).toContainEqual(expect.objectContaining({ file, at: ["d1_databases", index, "database_id"] })));
      table(config, "kv_namespaces").forEach((_entry, index) => expect(edits).toContainEqual(expect.objectContaining({ file, at: ["kv_namespaces", index, "id"] })));
    }
  });

  it("migrates every shard of the configs with every migration, and deploys the notifier before the API Worker, after them", () => {
    const result = plan();
    const shards = table(CONFIGS.api.config, "d1_databases").filter((entry) => shardNameOfBinding(String(entry.binding)));
    expect(result.migrations.map((each) => each.database).sort()).toEqual(shards.map((entry) => String(entry.database_name)).sort());
    for (const migration of result.migrations) expect(migration.pending).toEqual(MIGRATIONS);
    expect(result.workers.map((each) => [each.worker, each.how])).toEqual([["notifier", "deploy"], ["api", "deploy"]]);

    const text = planText(result, { dryRun: true, rollout: ROLLOUT });
    const lastMigration = Math.max(...result.migrations.map((each) => text.indexOf(`d1 migrations apply ${each.database} `)));
    const notifier = text.indexOf("npx wrangler deploy -c src/notifier/wrangler.jsonc");
    const api = text.indexOf("npx wrangler deploy -c wrangler.jsonc");
    expect(Math.min(...result.migrations.map((each) => text.indexOf(`d1 migrations apply ${each.database} `)))).toBeGreaterThan(0);
    expect(lastMigration).toBeLessThan(notifier);
    expect(notifier).toBeLessThan(api);
    expect(text.indexOf(`GET <deployed URL>/receipts/v2/status`)).toBeGreaterThan(api);
    expect(text).toContain("GET <deployed URL>/receipts/v2/openapi.json");
  });

  it("--jurisdiction eu creates every store that can hold a shopper's data in the EU, and records it on the bucket and the Workflows", () => {
    const result = plan({ jurisdiction: "eu" });
    expect(result.refusals).toEqual([]);
    const personal = personalBindings();
    for (const resource of result.resources) {
      const holdsShopperData = resource.kind === "d1" || resource.kind === "queue" || resource.usedBy.some((use) => personal.has(use.split(" ").at(-1)!));
      expect(resource.create!.includes("--jurisdiction"), `${resource.kind} ${resource.name}`).toBe(holdsShopperData);
      if (holdsShopperData) expect(resource.create!.slice(-2)).toEqual(["--jurisdiction", "eu"]);
    }
    table(CONFIGS.api.config, "workflows").forEach((_entry, index) =>
      expect(result.edits).toContainEqual({ file: "wrangler.jsonc", at: ["workflows", index, "jurisdiction"], value: "eu" }),
    );
    expect(result.edits).toContainEqual({ file: "wrangler.jsonc", at: ["r2_buckets", 0, "jurisdiction"], value: "eu" });
  });

  it("run again on a deployed account creates nothing, migrates only what is pending, and rolls each Worker out", () => {
    const result = plan({ existing: deployedAccount(null, { "receipts-v2-s1": [], "receipts-v2-s2": ["0022_deflated_bodies.sql"] }) });
    expect(result.refusals).toEqual([]);
    expect(result.resources.filter((each) => each.create)).toEqual([]);
    expect(result.migrations.map((each) => [each.shard, each.pending])).toEqual([["s1", []], ["s2", ["0022_deflated_bodies.sql"]]]);
    expect(result.workers.map((each) => [each.worker, each.how, each.args[0]])).toEqual([["notifier", "rollout", "versions"], ["api", "rollout", "versions"]]);
    const text = planText(result, { dryRun: true, rollout: ROLLOUT });
    expect(text).toContain("s1 (receipts-v2-s1): up to date");
    expect(text).toContain("versions deploy <new>@10 <current>@90");
  });

  it("refuses an account whose stores are in another jurisdiction, naming each", () => {
    const intoEu = plan({ jurisdiction: "eu", existing: deployedAccount(null) });
    expect(intoEu.refusals.join("\n")).toContain("D1 database receipts-v2-s1 exists in the default jurisdiction, not eu");
    expect(intoEu.refusals.join("\n")).toContain("R2 bucket receipts-v2-archive exists in the default jurisdiction, not eu");
    expect(intoEu.refusals.join("\n")).toContain("queue receipts-v2-notices exists in the default jurisdiction, not eu");
    // KV holds no shopper's data: where it lies is no reason to refuse.
    expect(intoEu.refusals.join("\n")).not.toContain("KV namespace");

    const outOfEu = plan({ existing: deployedAccount("eu") });
    expect(outOfEu.refusals).toContainEqual(expect.stringContaining("receipts-v2-s2 exists in eu, not the default jurisdiction: deploy with --jurisdiction eu"));
    expect(plan({ jurisdiction: "eu", existing: deployedAccount("eu") }).refusals).toEqual([]);
  });

  it("refuses configs that record another jurisdiction, and a config bound by id to a database the account does not hold", () => {
    const euConfigs = {
      ...CONFIGS,
      api: { ...CONFIGS.api, config: { ...CONFIGS.api.config, r2_buckets: [{ binding: "ARCHIVE", bucket_name: "receipts-v2-archive", jurisdiction: "eu" }] } },
    };
    expect(plan({ configs: euConfigs, jurisdiction: "us" }).refusals).toContainEqual(expect.stringContaining("The configs record the deployment in eu, not us"));
    // Without the flag, the deploy takes the configs' jurisdiction.
    expect(plan({ configs: euConfigs }).jurisdiction).toBe("eu");

    const bound = structuredClone(CONFIGS);
    (bound.notifier.config.d1_databases as Entry[])[0]!.database_id = "11111111-1111-4111-8111-111111111111";
    expect(plan({ configs: bound }).refusals).toContainEqual(expect.stringContaining("src/notifier/wrangler.jsonc binds D1 database receipts-v2-s1 by id 11111111-1111-4111-8111-111111111111, which the account does not hold"));
    expect(plan({ configs: bound, existing: deployedAccount(null) }).refusals).toContainEqual(expect.stringContaining("but the account's is 00000000-0000-4000-8000-000000000000"));
  });

  it("a missing secrets file is one line naming it and how to make it; secret values never reach the plan", () => {
    expect(requiredSecrets(CONFIGS.api.config).sort()).toEqual(["AUDIT_HASH_KEY", "TOKEN_KEYS"]);
    expect(requiredSecrets(CONFIGS.notifier.config).sort()).toEqual(["APP_PUSH_SECRET", "APP_PUSH_URL"]);
    const result = plan({ secrets: [SECRETS[0]!, { worker: "api", file: ".secrets/api.json" }] });
    const problem = result.secrets.find((each) => each.worker === "api")!.problem!;
    expect(problem).toBe("Missing .secrets/api.json (TOKEN_KEYS, AUDIT_HASH_KEY): make it with `npm run keys -- files --push-url <the app push service's URL>`.");
    expect(problem.split("\n")).toHaveLength(1);
    expect(plan({ secrets: [{ ...SECRETS[0]!, names: ["APP_PUSH_URL"] }, SECRETS[1]!] }).secrets[0]!.problem).toContain(".secrets/notifier.json lacks APP_PUSH_SECRET");
  });
});

describe("docs/operations.md#data-residency npm run shards -- add", () => {
  it("creates a new shard's database in the deployment's jurisdiction, and refuses another", () => {
    const eu = [{ ...CONFIGS.api.config, r2_buckets: [{ binding: "ARCHIVE", bucket_name: "receipts-v2-archive", jurisdiction: "eu" }] }, CONFIGS.notifier.config];
    expect(addJurisdiction(undefined, eu)).toBe("eu");
    expect(addJurisdiction("eu", eu)).toBe("eu");
    expect(() => addJurisdiction("us", eu)).toThrow("The deployment's stores are in eu (its configs say so), not us");
    expect(addJurisdiction(undefined, [CONFIGS.api.config, CONFIGS.notifier.config])).toBeUndefined();
    expect(() => addJurisdiction("eu", [CONFIGS.api.config, CONFIGS.notifier.config])).toThrow("in the default jurisdiction");
    expect(() => addJurisdiction("mars", eu)).toThrow(/Not a jurisdiction/);
  });
});

describe("docs/operations.md#deploy-from-zero what the account holds, read from wrangler's output", () => {
  it("reads D1's, KV's, R2's and the queues' listings, the pending migrations, and the IDs create printed", () => {
    expect(parseD1List(JSON.stringify([{ uuid: "u1", name: "receipts-v2-s1", jurisdiction: "eu" }, { uuid: "u2", name: "other" }]))).toEqual([
      { name: "receipts-v2-s1", id: "u1", jurisdiction: "eu" },
      { name: "other", id: "u2" },
    ]);
    expect(parseKvList(JSON.stringify([{ id: "a".repeat(32), title: "receipts-v2-clients" }]))).toEqual([{ name: "receipts-v2-clients", id: "a".repeat(32) }]);
    expect(parseR2List("Listing buckets...\nname:           receipts-v2-archive\ncreation_date:  2026-11-01T00:00:00.000Z\n\nname:  other\ncreation_date: x\n", "eu")).toEqual([
      { name: "receipts-v2-archive", jurisdiction: "eu" },
      { name: "other", jurisdiction: "eu" },
    ]);
    const queues = [
      "┌────┬─────────────────────┬──────────────┬────────────┐",
      "│ id │ name                │ jurisdiction │ created_on │",
      "├────┼─────────────────────┼──────────────┼────────────┤",
      "│ q1 │ receipts-v2-notices │ eu           │ 2026-11-01 │",
      "├────┼─────────────────────┼──────────────┼────────────┤",
      "│ q2 │ receipts-v2-sweeps  │              │ 2026-11-01 │",
      "└────┴─────────────────────┴──────────────┴────────────┘",
    ].join("\n");
    expect(parseQueuesList(queues)).toEqual([
      { name: "receipts-v2-notices", id: "q1", jurisdiction: "eu" },
      { name: "receipts-v2-sweeps", id: "q2", jurisdiction: null },
    ]);
    expect(parseQueuesList("│ id │ name │ created_on │\n│ q3 │ receipts-v2-notices │ x │")).toEqual([{ name: "receipts-v2-notices", id: "q3", jurisdiction: null }]);
    expect(parsePendingMigrations("Migrations to be applied:\n│ 0021_app_user_jobs.sql │\n│ 0022_deflated_bodies.sql │")).toEqual(["0021_app_user_jobs.sql", "0022_deflated_bodies.sql"]);
    expect(parsePendingMigrations("✅ No migrations to apply!")).toEqual([]);
    expect(createdNamespaceId(`{\n  "kv_namespaces": [\n    {\n      "binding": "CLIENTS",\n      "id": "${"b".repeat(32)}"\n    }\n  ]\n}`)).toBe("b".repeat(32));
    expect(isMissingWorker("This Worker does not exist on your account. [code: 10007]")).toBe(true);
    expect(isMissingWorker("fetch failed")).toBe(false);
  });
});

describe("docs/operations.md#data-residency the pinned wrangler", () => {
  it("creates queues in a jurisdiction, as operations.md says and the deploy relies on", async () => {
    const help = await wranglerAsync(["queues", "create", "--help"]);
    expect(help).toMatch(/--jurisdiction\s+The jurisdiction of the queue/);
    const operations = readFileSync(path.join(ROOT, "docs/operations.md"), "utf8");
    expect(operations).toContain("`wrangler queues create --jurisdiction eu`");
    expect(operations).not.toMatch(/no such flag for `wrangler queues create`/);
  });
});

describe("docs/operations.md#deploy-from-zero npm run deploy -- --dry-run, as a process", () => {
  it("prints the whole plan for an empty account in the EU, builds both Workers, and needs no account", async () => {
    const result = await runScriptAsync("deploy", ["--dry-run", "--jurisdiction", "eu", "--secrets-dir", "test/no-such-secrets"]);
    expect(result.status, result.stderr).toBe(0);
    const out = result.stdout;
    for (const line of [
      "npx wrangler d1 create receipts-v2-s1 --jurisdiction eu",
      "npx wrangler d1 create receipts-v2-s2 --jurisdiction eu",
      "npx wrangler kv namespace create receipts-v2-clients",
      "npx wrangler kv namespace create receipts-v2-shard-states",
      "npx wrangler r2 bucket create receipts-v2-archive --jurisdiction eu",
      "npx wrangler queues create receipts-v2-notices --jurisdiction eu",
      "npx wrangler queues create receipts-v2-notices-failed --jurisdiction eu",
      "npx wrangler queues create receipts-v2-sweeps --jurisdiction eu",
      "npx wrangler d1 migrations apply receipts-v2-s1 --remote -c wrangler.jsonc",
      "Missing test/no-such-secrets/api.json (TOKEN_KEYS, AUDIT_HASH_KEY): make it with `npm run keys -- files",
      "npx wrangler deploy -c src/notifier/wrangler.jsonc --secrets-file test/no-such-secrets/notifier.json",
      "planned for an empty account",
    ]) {
      expect(out).toContain(line);
    }
    expect(out.indexOf("-c src/notifier/wrangler.jsonc --secrets-file")).toBeLessThan(out.indexOf("npx wrangler deploy -c wrangler.jsonc --secrets-file"));
    for (const worker of ["api", "notifier"]) {
      const bundle = path.join(ROOT, "dist", worker, "index.js");
      expect(existsSync(bundle) && statSync(bundle).mtimeMs > Date.now() - 10 * 60_000, bundle).toBe(true);
    }
  }, 300_000);
});
