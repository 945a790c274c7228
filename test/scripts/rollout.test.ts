/**
 * docs/operations.md "Rollout and rollback": the health gate's decision from the status answers,
 * the versions a rollout and `npm run rollback` act on, and a rollout carried out against a
 * recording wrangler, all in-process.
 */
import { describe, expect, it } from "vitest";
import {
  currentVersion,
  gateDecision,
  rollOut,
  rollbackTarget,
  uploadedVersionId,
  type Deployment,
  type Probe,
  type RolloutPolicy,
} from "../../scripts/lib/rollout.ts";
import type { StatusAnswer } from "../../scripts/lib/status.ts";

const POLICY: RolloutPolicy = { share: 10, holdSeconds: 600, probeSeconds: 15, maxErrorShare: 0.1, minProbes: 5 };

function status(...reasons: string[]): StatusAnswer {
  return {
    data: { healthy: reasons.length === 0, reasons: reasons.map((code) => ({ code, message: `${code} happened` })) } as unknown as StatusAnswer["data"],
    status: reasons.length === 0 ? "OK" : "Service Unavailable",
    status_code: reasons.length === 0 ? 200 : 503,
  };
}
const healthy = (count: number): Probe[] => Array.from({ length: count }, () => ({ status: status() }));

describe("docs/operations.md#rollout-and-rollback the health gate", () => {
  it("holds a healthy new version until the hold has passed with enough probes, then promotes it", () => {
    expect(gateDecision(status(), healthy(3), 30, POLICY)).toEqual({ verdict: "hold" });
    expect(gateDecision(status(), healthy(40), 599, POLICY)).toEqual({ verdict: "hold" });
    expect(gateDecision(status(), healthy(4), 900, POLICY)).toEqual({ verdict: "hold" });
    expect(gateDecision(status(), healthy(40), 600, POLICY)).toEqual({ verdict: "promote" });
  });

  it("undoes the release at the first status with a reason the service did not have before, naming it", () => {
    const decision = gateDecision(status(), [...healthy(2), { status: status("delivery_late") }], 45, POLICY);
    expect(decision).toEqual({ verdict: "undo", reason: "the new version's status turned unhealthy: delivery_late (delivery_late happened)" });
  });

  it("a reason the service had before the release is not the release's fault", () => {
    expect(gateDecision(status("shard_fill"), Array.from({ length: 40 }, () => ({ status: status("shard_fill") })), 600, POLICY)).toEqual({ verdict: "promote" });
    expect(gateDecision(status("shard_fill"), [{ status: status("shard_fill", "failed_notices") }], 15, POLICY)).toMatchObject({
      verdict: "undo",
      reason: expect.stringContaining("failed_notices"),
    });
  });

  it("undoes the release once more probes failed than the error share allows", () => {
    const failing = (count: number): Probe[] => Array.from({ length: count }, (_, index) => ({ failure: `GET /receipts/v2/status answered 500 (${index})` }));
    expect(gateDecision(status(), [...healthy(19), ...failing(3)], 300, POLICY)).toEqual({
      verdict: "undo",
      reason: "3 of 22 probes of the new version failed (more than 10 %), the last: GET /receipts/v2/status answered 500 (2)",
    });
    expect(gateDecision(status(), [...healthy(19), ...failing(2)], 300, POLICY)).toEqual({ verdict: "hold" });
    expect(gateDecision(status(), failing(1), 15, { ...POLICY, maxErrorShare: 0 })).toMatchObject({ verdict: "undo" });
  });
});

const at = (created_on: string, ...versions: [string, number][]): Deployment => ({
  created_on,
  versions: versions.map(([version_id, percentage]) => ({ version_id, percentage })),
});

describe("docs/operations.md#rollout-and-rollback the versions acted on", () => {
  it("reads the uploaded version's ID, and refuses to start from a split", () => {
    expect(uploadedVersionId("Uploaded receipts-v2-api (3.1 sec)\nWorker Version ID: 1c4f0d3e-2b9a-4e6f-8a7b-9c0d1e2f3a4b\n")).toBe("1c4f0d3e-2b9a-4e6f-8a7b-9c0d1e2f3a4b");
    expect(() => uploadedVersionId("--dry-run: exiting now.")).toThrow(/no version ID/);
    expect(currentVersion(at("2026-11-01", ["v1", 100]), "receipts-v2-api")).toBe("v1");
    expect(() => currentVersion(at("2026-11-01", ["v2", 10], ["v1", 90]), "receipts-v2-api")).toThrow(/split between versions \(v2@10, v1@90\).*npm run rollback/);
  });

  it("rollback goes to the version that served all traffic before: during a split, the one it started from", () => {
    const history = [at("2026-11-01T00:00:00Z", ["v1", 100]), at("2026-11-02T00:00:00Z", ["v2", 100])];
    expect(rollbackTarget(history)).toBe("v1");
    expect(rollbackTarget([...history, at("2026-11-03T00:00:00Z", ["v3", 10], ["v2", 90])])).toBe("v2");
    // After a promotion the split before it is skipped: back to the version before the release.
    expect(rollbackTarget([...history, at("2026-11-03T00:00:00Z", ["v3", 10], ["v2", 90]), at("2026-11-03T00:10:00Z", ["v3", 100])].reverse())).toBe("v2");
    expect(rollbackTarget([at("2026-11-01T00:00:00Z", ["v1", 100])])).toBeUndefined();
  });
});

describe("docs/operations.md#rollout-and-rollback a rollout carried out", () => {
  const WORKERS = [
    { name: "receipts-v2-notifier", file: "src/notifier/wrangler.jsonc", secretsFile: ".secrets/notifier.json" },
    { name: "receipts-v2-api", file: "wrangler.jsonc", secretsFile: ".secrets/api.json" },
  ];

  function recording(probes: (version?: string) => Probe) {
    const calls: string[] = [];
    const logged: string[] = [];
    let clock = 0;
    const io = {
      wrangler(args: string[]) {
        calls.push(args.join(" "));
        const config = args[args.indexOf("-c") + 1]!;
        const tag = config.includes("notifier") ? "n" : "a";
        if (args[0] === "deployments") return JSON.stringify(at("2026-11-01", [`${tag}-old`, 100]));
        if (args[0] === "versions" && args[1] === "upload") return `Worker Version ID: 00000000-0000-4000-8000-0000000000${tag === "n" ? "01" : "02"}`;
        return "";
      },
      probe: async (version?: string) => probes(version),
      sleep: async (ms: number) => void (clock += ms),
      now: () => clock,
      log: (line: string) => void logged.push(line),
    };
    return { io, calls, logged };
  }
  const NEW_API = "00000000-0000-4000-8000-000000000002";
  const NEW_NOTIFIER = "00000000-0000-4000-8000-000000000001";

  it("splits the notifier, then the API Worker; probes the new API version; then gives each all traffic and applies the triggers", async () => {
    const probed: (string | undefined)[] = [];
    const { io, calls } = recording((version) => (probed.push(version), { status: status() }));
    await rollOut(WORKERS, POLICY, io);
    const deploys = calls.filter((call) => call.startsWith("versions deploy") || call.startsWith("triggers"));
    expect(deploys).toEqual([
      `versions deploy ${NEW_NOTIFIER}@10 n-old@90 -y -c src/notifier/wrangler.jsonc --message rollout: 10 %`,
      `versions deploy ${NEW_API}@10 a-old@90 -y -c wrangler.jsonc --message rollout: 10 %`,
      `versions deploy ${NEW_NOTIFIER}@100 -y -c src/notifier/wrangler.jsonc --message rollout: all traffic`,
      "triggers deploy -c src/notifier/wrangler.jsonc",
      `versions deploy ${NEW_API}@100 -y -c wrangler.jsonc --message rollout: all traffic`,
      "triggers deploy -c wrangler.jsonc",
    ]);
    expect(calls).toContain("versions upload -c wrangler.jsonc --secrets-file .secrets/api.json --message npm run deploy");
    // The baseline from the service as it is, then the new version alone, for the whole hold.
    expect(probed[0]).toBeUndefined();
    expect(probed.slice(1).every((version) => version === NEW_API)).toBe(true);
    expect(probed.length - 1).toBeGreaterThanOrEqual(POLICY.holdSeconds / POLICY.probeSeconds);
  });

  it("an unhealthy status puts the API Worker, then the notifier, back on their versions and says why", async () => {
    let count = 0;
    const { io, calls } = recording((version) => ({ status: version && ++count >= 3 ? status("push_endpoint_down") : status() }));
    await expect(rollOut(WORKERS, POLICY, io)).rejects.toThrow(
      "Rollout undone, every Worker back on its previous version: the new version's status turned unhealthy: push_endpoint_down (push_endpoint_down happened).",
    );
    const deploys = calls.filter((call) => call.startsWith("versions deploy") || call.startsWith("triggers"));
    expect(deploys.slice(2).map((call) => call.split(" --message")[0])).toEqual([
      "versions deploy a-old@100 -y -c wrangler.jsonc",
      "versions deploy n-old@100 -y -c src/notifier/wrangler.jsonc",
    ]);
  });
});
