/**
 * Two `issue` commands racing for one --client-id never both succeed. KV has no
 * compare-and-set, so the loser finds out by reading back and exits non-zero without its secret.
 */
import { spawnSync } from "node:child_process";
import { describe, expect, it } from "vitest";
import { hashClientSecret } from "../../src/shared/secrets.ts";
import { ROOT, type ScriptResult, freshState, runScriptAsync } from "../support/run-script.ts";

const state = freshState();

/** An issue for `clientId`, without blocking, so that two commands run at once. */
function issueAsync(clientId: string, chain: string): Promise<ScriptResult> {
  return runScriptAsync("clients", ["issue", "--chain", chain, "--client-id", clientId, "--json", "--persist-to", state]);
}

function storedRecord(clientId: string): { secret_hash: string; chains: string[] } {
  const args = ["kv", "key", "get", `client:${clientId}`, "--binding", "CLIENTS", "--text", "--local", "--persist-to", state];
  return JSON.parse(spawnSync("wrangler", args, { cwd: ROOT, encoding: "utf8" }).stdout);
}

describe("`clients issue` commands racing for one --client-id: docs/operations.md#clients", () => {
  it("two issues for one --client-id at once: exactly one exits 0, and KV holds that one's secret", async () => {
    const results = await Promise.all([issueAsync("pos-race", "chain-a"), issueAsync("pos-race", "chain-b")]);
    const winners = results.filter((result) => result.status === 0);
    const losers = results.filter((result) => result.status !== 0);
    expect(results.map((result) => result.status).sort(), JSON.stringify(results)).toEqual([0, 1]);

    const winner = JSON.parse(winners[0]!.stdout) as { client_id: string; client_secret: string; chains: string[] };
    const stored = storedRecord("pos-race");
    expect(stored.secret_hash).toBe(await hashClientSecret(winner.client_secret));
    expect(stored.chains).toEqual(winner.chains);

    // The loser says it lost and shows no secret, as valid or otherwise.
    expect(losers[0]!.stdout).toBe("");
    expect(losers[0]!.stderr).toContain("pos-race");
    expect(losers[0]!.stderr).not.toMatch(/client_secret|[A-Za-z0-9_-]{43}/);
  }, 120_000);
});
