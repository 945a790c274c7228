/**
 * The commands of `npm run clients` (docs/api.md#operators), on a {@link ClientStore}: the
 * script's is CLIENTS through `wrangler kv`; the tests run most cases in-process on the same
 * local namespace through Miniflare, where a wrangler start each would cost seconds.
 */
import { setTimeout as sleep } from "node:timers/promises";
import { base64url } from "jose";
import { newClientRecord, revokingIssuedTokens } from "../../src/shared/client-records.ts";
import { hashClientSecret, makeClientSecret } from "../../src/shared/secrets.ts";
import { RATE_TIERS, isRateTier, ratePolicy } from "../../src/shared/rate-limits.ts";
import { APP_SCOPE, OPS_SCOPE, type ClientRecord } from "../../src/shared/types.ts";
import type { ClientStore } from "./client-store.ts";
import { UsageError, parse, table, usableId, type Commands } from "./cli.ts";
import { TARGET_OPTIONS, targetOf, type Target } from "./wrangler.ts";

/** The client records of a target (the local state, another one, or the deployment). */
export type StoreOf = (target: Target) => ClientStore;

export const CLIENTS_USAGE = `Usage: npm run clients -- <command> [options]

  issue --chain <chain_id> [--chain <another>] [--client-id <id>] [--json]
                       issue a POS client; prints its secret once
  issue --app [--client-id <id>] [--json]
                       issue the app push service's client (scope service.app, no
                       chains: it reads the event feed); prints its secret once
  issue --ops [--client-id <id>] [--json]
                       issue an operator's monitor (scope service.ops, no chains: it
                       reads GET /receipts/v2/status); prints its secret once
  list [--json]        every client with its chains and state
  show <client_id> [--json]
  disable <client_id>  refuse its logins and every token issued so far
  enable <client_id>   allow logins again; tokens issued before disable stay refused
  rotate <client_id> [--json]
                       a new secret; the old one and every token issued so far stop working
  tier <client_id> <standard|large|xlarge>
                       the client's limits on add, delete and the event feed: large
                       allows 5 times standard's, xlarge 10 times (docs/api.md#rate-limits)

Every command acts on the local state of 'npm start' unless --remote is given
(--persist-to <dir> picks another local state directory).`;

/** The commands by name, acting on the store that `storeOf` gives for the target their flags name. */
export function clientCommands(storeOf: StoreOf): Commands {
  return {
    issue: (args) => issue(storeOf, args),
    list: (args) => list(storeOf, args),
    show: (args) => onOneClient(storeOf, "show", args),
    disable: (args) => onOneClient(storeOf, "disable", args),
    enable: (args) => onOneClient(storeOf, "enable", args),
    rotate: (args) => onOneClient(storeOf, "rotate", args),
    tier: (args) => setTier(storeOf, args),
  };
}

const COMMON = {
  ...TARGET_OPTIONS,
  json: { type: "boolean" },
} as const;

// How long a remote KV write may take to be seen everywhere (Cloudflare documents up to 60 s).
const KV_PROPAGATION_MS = 60_000;
// A rival's check and write may be slowed by what ours was not (its runtime starting, the other
// core busy): in-process they take milliseconds, so a margin of this much covers its delay.
const RACE_MARGIN_MS = 500;

async function issue(storeOf: StoreOf, argv: string[]): Promise<void> {
  const { values, positionals } = parse(argv, {
    ...COMMON,
    chain: { type: "string", multiple: true },
    "client-id": { type: "string" },
    app: { type: "boolean" },
    ops: { type: "boolean" },
  });
  noPositionals(positionals);
  const chains = values.chain ?? [];
  if (values.app && values.ops) throw new UsageError("issue takes --app or --ops, not both: a client has one service scope.");
  const service = values.app ? "app" : values.ops ? "ops" : undefined;
  if (service && chains.length > 0) throw new UsageError(`issue --${service} takes no --chain: the ${service === "app" ? "app's client" : "monitor"} acts for no chain.`);
  if (!service && chains.length === 0) throw new UsageError("issue needs at least one --chain <chain_id>, or --app, or --ops.");
  chains.forEach((chain) => usableId("--chain", chain));
  const prefix = service ?? "pos";
  const clientId = values["client-id"] ?? `${prefix}_${base64url.encode(crypto.getRandomValues(new Uint8Array(9)))}`;
  usableId("--client-id", clientId);
  const target = targetOf(values);
  const store = storeOf(target);
  const checkStarted = Date.now();
  if (await store.read(clientId)) throw new Error(`Client ${clientId} already exists; use rotate for a new secret.`);

  const { record, secret } = await newClientRecord({ client_id: clientId, chains, ...(service && { scopes: [service === "app" ? APP_SCOPE : OPS_SCOPE] }) });
  // A --client-id's write is not made again while the local state is busy: a late write could land
  // after a rival's check. A made client_id is 72 random bits that no rival can be writing, so its
  // write waits the busy state out like any other call.
  try {
    await store.write(record, { retryLocked: values["client-id"] === undefined });
  } catch (error) {
    throw new Error(`Client ${clientId} was not issued; no secret is valid. ${(error as Error).message}`);
  }
  // A made client_id is 72 random bits: no other issue can be racing for it.
  if (values["client-id"] !== undefined) await confirmStillOurs(store, target, record, Date.now() - checkStarted);
  printSecret(values.json, record, secret, "Issued");
}

/**
 * KV has no compare-and-set, so two issues for one --client-id can both find it free and both
 * write; the last write stands. A rival that found the ID free before our write landed has its own
 * write still to make, which takes at most about as long as our read and write did (the same
 * calls, under the same load), plus remotely up to KV's 60 s propagation, over which its read may
 * have missed ours. We wait that long and a margin, then read back: the one whose record KV does
 * not hold has lost, and its secret was never valid. docs/operations.md#clients says what this can
 * and cannot promise.
 */
async function confirmStillOurs(store: ClientStore, target: Target, record: ClientRecord, checkMs: number): Promise<void> {
  const waitMs = (target.remote ? KV_PROPAGATION_MS : 0) + checkMs + RACE_MARGIN_MS;
  if (target.remote) {
    console.error(`Waiting ${Math.ceil(waitMs / 1000)} s to confirm that no other issue for ${record.client_id} raced this one.`);
  }
  await sleep(waitMs);
  if ((await store.read(record.client_id))?.secret_hash !== record.secret_hash) {
    throw new Error(
      `Another issue for client ${record.client_id} ran at the same time and its record stands; ` +
        `this command's secret was never valid and is not shown. See 'npm run clients -- show ${record.client_id}'.`,
    );
  }
}

async function list(storeOf: StoreOf, argv: string[]): Promise<void> {
  const { values, positionals } = parse(argv, COMMON);
  noPositionals(positionals);
  const records = (await storeOf(targetOf(values)).readAll()).map(publicView);
  if (values.json) console.log(JSON.stringify(records));
  else if (records.length === 0) console.log("No clients.");
  else {
    const rows = records.map((record) => [record.client_id, stateOf(record), record.chains.join(","), record.scopes.join(","), tierOf(record), record.updated_at]);
    console.log(table(["CLIENT_ID", "STATE", "CHAINS", "SCOPES", "TIER", "UPDATED"], rows));
  }
}

async function onOneClient(storeOf: StoreOf, command: "show" | "disable" | "enable" | "rotate", argv: string[]): Promise<void> {
  const { values, positionals } = parse(argv, COMMON);
  if (positionals.length !== 1) throw new UsageError(`${command} needs exactly one client_id.`);
  const clientId = usableId("client_id", positionals[0]!);
  const target = targetOf(values);
  const store = storeOf(target);
  const record = await store.read(clientId);
  if (!record) throw new Error(`No client ${clientId}.`);

  if (command === "show") {
    console.log(values.json ? JSON.stringify(publicView(record)) : describe(publicView(record)));
  } else if (command === "rotate") {
    const secret = makeClientSecret();
    const rotated = revokingIssuedTokens({ ...record, secret_hash: await hashClientSecret(secret) });
    await store.write(rotated);
    printSecret(values.json, rotated, secret, "Rotated");
  } else if (command === "disable") {
    await store.write(revokingIssuedTokens({ ...record, disabled: true }));
    console.log(
      `Disabled client ${clientId}. Logins see it at once; tokens issued so far are refused within about ` +
        "a minute (KV spread and isolate cache), and stay refused after enable.",
    );
  } else {
    // Tokens issued before the disable stay revoked: enable leaves tokens_valid_after alone.
    await store.write({ ...record, disabled: false, updated_at: new Date().toISOString() });
    console.log(`Enabled client ${clientId}. It can log in again wherever KV shows the change.`);
  }
}

// The record names a tier only above the standard one, so that a record without the field reads
// the same as one set back to standard.
async function setTier(storeOf: StoreOf, argv: string[]): Promise<void> {
  const { values, positionals } = parse(argv, COMMON);
  if (positionals.length !== 2) throw new UsageError("tier needs a client_id and a tier.");
  const clientId = usableId("client_id", positionals[0]!);
  const tier = positionals[1]!;
  if (!isRateTier(tier)) throw new UsageError(`tier must be one of ${RATE_TIERS.join(", ")}, not ${JSON.stringify(tier)}.`);
  const store = storeOf(targetOf(values));
  const record = await store.read(clientId);
  if (!record) throw new Error(`No client ${clientId}.`);
  const { rate_tier: _previous, ...rest } = record;
  await store.write({ ...rest, ...(tier !== "standard" && { rate_tier: tier }), updated_at: new Date().toISOString() });
  const limits = (["add", "delete", "events"] as const).map((route) => {
    const policy = ratePolicy(route, tier);
    return `${route} ${policy.quota} per ${policy.windowSeconds} s`;
  });
  console.log(`Client ${clientId} is on tier ${tier}: ${limits.join(", ")}. Requests see it within about a minute (KV spread and isolate cache).`);
}

function printSecret(json: boolean | undefined, record: ClientRecord, secret: string, verb: string): void {
  if (json) {
    console.log(JSON.stringify({ client_id: record.client_id, client_secret: secret, chains: record.chains }));
    return;
  }
  const app = record.scopes.includes(APP_SCOPE);
  const ops = record.scopes.includes(OPS_SCOPE);
  const whose = app ? `the app push service (scope ${APP_SCOPE})` : ops ? `an operator's monitor (scope ${OPS_SCOPE})` : `chains ${record.chains.join(", ")}`;
  console.log(`${verb} client ${record.client_id} for ${whose}.
  client_id:     ${record.client_id}
  client_secret: ${secret}
The secret is shown only this once: put it into the ${app ? "app push service's" : ops ? "monitor's" : "POS"} configuration now.`);
}

/** A record without its hash: nothing an operator's terminal needs to show. */
function publicView({ secret_hash: _hash, ...rest }: ClientRecord): Omit<ClientRecord, "secret_hash"> {
  return rest;
}

function stateOf(record: Omit<ClientRecord, "secret_hash">): string {
  return record.disabled ? "disabled" : "enabled";
}

function describe(record: Omit<ClientRecord, "secret_hash">): string {
  const state = stateOf(record);
  return `${record.client_id}\t${state}\tchains=${record.chains.join(",")}\tscopes=${record.scopes.join(",")}\ttier=${tierOf(record)}\tupdated=${record.updated_at}`;
}

function tierOf(record: Pick<ClientRecord, "rate_tier">): string {
  return record.rate_tier ?? "standard";
}

function noPositionals(positionals: string[]): void {
  if (positionals.length > 0) throw new UsageError(`Unexpected argument: ${positionals[0]}`);
}
