/**
 * A release that stops itself (docs/operations.md "Rollout and rollback"): each Worker's new
 * version is uploaded, then given a small share of the traffic beside the current one (the
 * notifier first, as in a deploy), held there while the new API version's status stays as healthy
 * as it was before the release and its answers stay within the error share, then given all of it;
 * an unhealthy status or too many failed probes put both Workers back on their current versions and
 * say why. The decisions are pure functions of what wrangler and the status endpoint answered, so
 * the tests decide them from fixtures; {@link rollOut} only carries them out.
 */
import type { StatusAnswer } from "./status.ts";
import type { Wrangler } from "./account.ts";

/** One Worker taking part in a rollout. */
export interface RolloutWorker {
  name: string;
  /** Its config, for wrangler's -c. */
  file: string;
  secretsFile: string;
}

/** How a rollout goes: the first share, how long it is held there, how often and how strictly it is probed. */
export interface RolloutPolicy {
  /** Percent of traffic (and of queue and cron invocations) the new versions get first: 1 to 99. */
  share: number;
  holdSeconds: number;
  probeSeconds: number;
  /** The share of probes that may fail (no answer, or a 5xx that is not the status's own 503) before the release is undone. */
  maxErrorShare: number;
  /** Probes needed before a release may go to all traffic, whatever the hold. */
  minProbes: number;
}

/** The defaults `npm run deploy` rolls out with: 10 % for 10 minutes, a probe every 15 s, none of 40 failing. */
export const DEFAULT_ROLLOUT: RolloutPolicy = { share: 10, holdSeconds: 600, probeSeconds: 15, maxErrorShare: 0, minProbes: 5 };

/** A probe of the new version: its status answer, or why there was none. */
export type Probe = { status: StatusAnswer } | { failure: string };

/** What the gate decides after a probe. */
export type GateDecision = { verdict: "hold" } | { verdict: "promote" } | { verdict: "undo"; reason: string };

/**
 * The gate's decision from the status before the release (`baseline`) and every probe of the new
 * version since the split began. Undo at the first status with a reason the baseline did not
 * have (a service already unhealthy for a reason of its own, a shard past its fill share, is no
 * fault of the release), or once more probes failed than `maxErrorShare` allows; promote once
 * `holdSeconds` have passed with at least `minProbes` probes; hold otherwise.
 */
export function gateDecision(baseline: StatusAnswer | undefined, probes: readonly Probe[], heldSeconds: number, policy: RolloutPolicy): GateDecision {
  const known = new Set((baseline?.data.reasons ?? []).map((reason) => reason.code));
  for (const probe of probes) {
    if (!("status" in probe) || probe.status.data.healthy) continue;
    const fresh = probe.status.data.reasons.filter((reason) => !known.has(reason.code));
    if (fresh.length > 0) {
      return { verdict: "undo", reason: `the new version's status turned unhealthy: ${fresh.map((reason) => `${reason.code} (${reason.message})`).join("; ")}` };
    }
  }
  const failures = probes.filter((probe): probe is { failure: string } => "failure" in probe);
  if (failures.length > 0 && failures.length > policy.maxErrorShare * probes.length) {
    return {
      verdict: "undo",
      reason: `${failures.length} of ${probes.length} probes of the new version failed (more than ${Math.round(policy.maxErrorShare * 100)} %), the last: ${failures.at(-1)!.failure}`,
    };
  }
  if (heldSeconds >= policy.holdSeconds && probes.length >= policy.minProbes) return { verdict: "promote" };
  return { verdict: "hold" };
}

/** The version ID `wrangler versions upload` printed ("Worker Version ID: <uuid>"). */
export function uploadedVersionId(output: string): string {
  const match = /Worker Version ID:\s*([0-9a-f-]{36})/i.exec(output);
  if (!match) throw new Error(`wrangler versions upload printed no version ID:\n${output.slice(-500)}`);
  return match[1]!;
}

/** A deployment as `wrangler deployments list --json` and `deployments status --json` give it. */
export interface Deployment {
  created_on: string;
  versions: { version_id: string; percentage: number }[];
}

/** The version serving all traffic in a deployment, or undefined during a split. */
function soleVersion(deployment: Deployment): string | undefined {
  return deployment.versions.length === 1 && deployment.versions[0]!.percentage === 100 ? deployment.versions[0]!.version_id : undefined;
}

/** The version a Worker serves before a rollout; a Worker still split (a rollout that did not end) is refused. */
export function currentVersion(status: Deployment, worker: string): string {
  const version = soleVersion(status);
  if (!version) {
    throw new Error(
      `${worker} is split between versions (${status.versions.map((each) => `${each.version_id}@${each.percentage}`).join(", ")}): end that rollout first (npm run rollback).`,
    );
  }
  return version;
}

/**
 * The version `npm run rollback` goes back to, from a Worker's deployments (any order): during a
 * split, the version that served all traffic before it; otherwise the latest version before the
 * current one that served all traffic. Undefined when there is none (a first deploy).
 */
export function rollbackTarget(deployments: readonly Deployment[]): string | undefined {
  const [current, ...earlier] = [...deployments].sort((a, b) => b.created_on.localeCompare(a.created_on));
  if (!current) return undefined;
  const now = soleVersion(current);
  const before = earlier.map(soleVersion).filter((version): version is string => version !== undefined && version !== now);
  if (now !== undefined) return before[0];
  const inSplit = new Set(current.versions.map((version) => version.version_id));
  return before.find((version) => inSplit.has(version)) ?? before[0];
}

/** What a rollout reaches for besides wrangler: the probes, the clock, and where it reports. */
export interface RolloutIo {
  wrangler: Wrangler;
  /** The status of the API Worker, of one version of it when `version` is given. */
  probe(version?: string): Promise<Probe>;
  sleep(ms: number): Promise<void>;
  now(): number;
  log(line: string): void;
}

/**
 * Rolls out both Workers (the notifier first) by `policy`; resolves when every new version has all
 * the traffic and the triggers are applied, rejects with the reason after putting both back.
 */
export async function rollOut(workers: readonly RolloutWorker[], policy: RolloutPolicy, io: RolloutIo): Promise<void> {
  const versions = workers.map((worker) => {
    const current = currentVersion(JSON.parse(io.wrangler(["deployments", "status", "--json", "-c", worker.file])) as Deployment, worker.name);
    const next = uploadedVersionId(io.wrangler(["versions", "upload", "-c", worker.file, "--secrets-file", worker.secretsFile, "--message", "npm run deploy"]));
    io.log(`${worker.name}: uploaded ${next} beside ${current}.`);
    return { worker, current, next };
  });
  const baselineProbe = await io.probe();
  const baseline = "status" in baselineProbe ? baselineProbe.status : undefined;
  const deploy = (specs: string[], worker: RolloutWorker, message: string) =>
    io.wrangler(["versions", "deploy", ...specs, "-y", "-c", worker.file, "--message", message]);

  for (const { worker, current, next } of versions) {
    deploy([`${next}@${policy.share}`, `${current}@${100 - policy.share}`], worker, `rollout: ${policy.share} %`);
    io.log(`${worker.name}: ${policy.share} % on ${next}.`);
  }
  const api = versions.at(-1)!;
  const started = io.now();
  const probes: Probe[] = [];
  for (;;) {
    probes.push(await io.probe(api.next));
    const decision = gateDecision(baseline, probes, (io.now() - started) / 1000, policy);
    if (decision.verdict === "promote") break;
    if (decision.verdict === "undo") {
      for (const { worker, current } of [...versions].reverse()) deploy([`${current}@100`], worker, `rollout undone: ${decision.reason}`.slice(0, 100));
      throw new Error(`Rollout undone, every Worker back on its previous version: ${decision.reason}.`);
    }
    await io.sleep(policy.probeSeconds * 1000);
  }
  for (const { worker, next } of versions) {
    deploy([`${next}@100`], worker, "rollout: all traffic");
    io.wrangler(["triggers", "deploy", "-c", worker.file]);
    io.log(`${worker.name}: 100 % on ${next}; triggers applied.`);
  }
}
