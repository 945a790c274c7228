/**
 * docs/api.md#operators: `npm run clients`. Most cases run the script's commands in-process on the
 * CLIENTS namespace of a throwaway local state; the last block runs every command as a real
 * process on that same namespace, read back through wrangler. The API Worker runs on it too, for
 * logins.
 */
import type { Miniflare } from "miniflare";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CLIENTS_USAGE, clientCommands } from "../../scripts/lib/client-commands.ts";
import { clientStore } from "../../scripts/lib/client-store.ts";
import { closeLocalStates } from "../../scripts/lib/local-state.ts";
import { dispatch } from "../../scripts/lib/cli.ts";
import { hashClientSecret } from "../../src/shared/secrets.ts";
import { startApiWorker } from "../support/api-miniflare.ts";
import { PROCESSES_MS, freshState, runInProcess, runScriptAsync, runWranglerAsync, type ScriptResult } from "../support/run-script.ts";

const state = freshState();
let mf: Miniflare;
beforeAll(() => {
  mf = startApiWorker(state);
}, 60_000);
afterAll(async () => {
  await closeLocalStates();
  await mf?.dispose();
});

/** A command of `npm run clients`, in-process, on the test's local state. */
const clients = (...args: string[]): Promise<ScriptResult> =>
  runInProcess(CLIENTS_USAGE, (argv) => dispatch(clientCommands(clientStore), argv), [...args, "--persist-to", state]);

/** A command of `npm run clients` as an operator runs it: a process, and wrangler for KV. */
const spawned = (...args: string[]): Promise<ScriptResult> => runScriptAsync("clients", [...args, "--persist-to", state]);

async function issued(...args: string[]): Promise<{ client_id: string; client_secret: string; chains: string[] }> {
  const result = await clients("issue", ...args, "--json");
  expect(result.stderr).toBe("");
  expect(result.status).toBe(0);
  return JSON.parse(result.stdout);
}

async function stored(clientId: string): Promise<Record<string, unknown>> {
  const result = await clients("show", clientId, "--json");
  expect(result.status).toBe(0);
  return JSON.parse(result.stdout);
}

/** The client's record as KV holds it, or null. */
async function kvValue(clientId: string): Promise<string | null> {
  return (await mf.getKVNamespace("CLIENTS")).get(`client:${clientId}`, "text");
}

/** The client's record as KV holds it, parsed; the test fails if there is none. */
async function kvRecord(clientId: string): Promise<Record<string, unknown>> {
  const raw = await kvValue(clientId);
  expect(raw, clientId).not.toBeNull();
  return JSON.parse(raw!);
}

describe("docs/api.md#operators npm run clients", () => {
  it("issue --json prints the client_id, the secret once and the chains; KV holds only the secret's hash", async () => {
    const client = await issued("--chain", "c1", "--chain", "c2", "--client-id", "pos-store-7");
    expect(client).toEqual({ client_id: "pos-store-7", client_secret: expect.stringMatching(/^[A-Za-z0-9_-]{43}$/), chains: ["c1", "c2"] });
    const raw = (await kvValue("pos-store-7"))!;
    expect(raw).not.toContain(client.client_secret);
    expect(JSON.parse(raw)).toMatchObject({
      client_id: "pos-store-7",
      secret_hash: await hashClientSecret(client.client_secret),
      chains: ["c1", "c2"],
      scopes: ["service.pos"],
      disabled: false,
    });
  });

  it("issue makes a client_id when none is given, and two issues never share one", async () => {
    const first = await issued("--chain", "c1");
    const second = await issued("--chain", "c1");
    expect(first.client_id).toMatch(/^pos_[A-Za-z0-9_-]{12}$/);
    expect(second.client_id).not.toBe(first.client_id);
  });

  it("issue --app makes the app push service's client: scope service.app alone, no chains; --app with --chain is refused", async () => {
    const app = await issued("--app");
    expect(app).toEqual({ client_id: expect.stringMatching(/^app_[A-Za-z0-9_-]{12}$/), client_secret: expect.any(String), chains: [] });
    expect(await stored(app.client_id)).toMatchObject({ chains: [], scopes: ["service.app"], disabled: false });
    const mixed = await clients("issue", "--app", "--chain", "c1");
    expect(mixed.status).toBe(2);
    expect(mixed.stderr).toContain("--app takes no --chain");
  });

  it("issue refuses an existing client_id rather than overwrite its secret", async () => {
    await issued("--chain", "c1", "--client-id", "pos-taken");
    const again = await clients("issue", "--chain", "c9", "--client-id", "pos-taken");
    expect(again.status).toBe(1);
    expect(again.stderr).toContain("already exists");
    expect(await kvRecord("pos-taken")).toMatchObject({ chains: ["c1"] });
  });

  it("without --json, issue prints the secret once with a warning to store it", async () => {
    const result = await clients("issue", "--chain", "c1");
    expect(result.status).toBe(0);
    expect(result.stdout).toMatch(/client_secret: [A-Za-z0-9_-]{43}/);
    expect(result.stdout).toContain("only this once");
  });

  it("show and list never print the hash", async () => {
    const client = await issued("--chain", "c1");
    expect(await stored(client.client_id)).not.toHaveProperty("secret_hash");
    const listed = await clients("list", "--json");
    expect(listed.status).toBe(0);
    const records = JSON.parse(listed.stdout) as Record<string, unknown>[];
    expect(records.map((record) => record.client_id)).toContain(client.client_id);
    expect(listed.stdout).not.toContain("sha256:");
    const [header, ...lines] = (await clients("list")).stdout.trimEnd().split("\n");
    expect(header).toMatch(/^CLIENT_ID +STATE +CHAINS +SCOPES +TIER +UPDATED$/);
    const line = lines.find((text) => text.startsWith(`${client.client_id} `))!;
    // Aligned: each cell starts where its column's header does.
    expect(line.slice(header!.indexOf("STATE"))).toMatch(/^enabled +c1 +service\.pos +standard +\d{4}-/);
    expect(line.slice(header!.indexOf("CHAINS"))).toMatch(/^c1 /);
  });

  it("disable and enable flip the record; rotate replaces the hash and prints a new secret", async () => {
    const client = await issued("--chain", "c1");
    expect((await clients("disable", client.client_id)).status).toBe(0);
    expect(await kvRecord(client.client_id)).toMatchObject({ disabled: true });
    expect((await clients("enable", client.client_id)).status).toBe(0);
    expect(await kvRecord(client.client_id)).toMatchObject({ disabled: false });
    const rotated = JSON.parse((await clients("rotate", client.client_id, "--json")).stdout);
    expect(rotated.client_id).toBe(client.client_id);
    expect(rotated.client_secret).not.toBe(client.client_secret);
    expect((await kvRecord(client.client_id)).secret_hash).toBe(await hashClientSecret(rotated.client_secret));
  });

  it("revocation (docs/api.md#revocation): disable and rotate move tokens_valid_after on, enable keeps it", async () => {
    const client = await issued("--chain", "c1");
    const validAfter = async () => (await kvRecord(client.client_id)).tokens_valid_after as string | undefined;
    expect(await validAfter()).toBeUndefined();
    expect((await clients("disable", client.client_id)).status).toBe(0);
    const disabled = (await validAfter())!;
    expect(Date.parse(disabled)).toBeGreaterThan(Date.now() - 60_000);
    expect((await clients("enable", client.client_id)).status).toBe(0);
    expect(await validAfter()).toBe(disabled);
    expect((await clients("rotate", client.client_id)).status).toBe(0);
    expect(Date.parse((await validAfter())!)).toBeGreaterThan(Date.parse(disabled));
  });

  it("docs/api.md#limits tier grants a client a higher limit and takes it back: the record names it, standard leaves no field", async () => {
    const client = await issued("--chain", "c1");
    const granted = await clients("tier", client.client_id, "xlarge");
    expect(granted.status).toBe(0);
    expect(granted.stdout).toContain("tier xlarge: add 12000 per 10 s, delete 3000 per 10 s, events 1000 per 10 s");
    expect(await kvRecord(client.client_id)).toMatchObject({ rate_tier: "xlarge" });
    expect(await stored(client.client_id)).toMatchObject({ rate_tier: "xlarge" });
    expect((await clients("tier", client.client_id, "standard")).status).toBe(0);
    expect(await kvRecord(client.client_id)).not.toHaveProperty("rate_tier");
  });

  it("docs/api.md#limits a client on tier large gets the large policy on add, against the real Worker", async () => {
    const client = await issued("--chain", "c1");
    await clients("tier", client.client_id, "large");
    const login = await mf.dispatchFetch("http://localhost/receipts/v2/login", {
      method: "POST",
      headers: { client_id: client.client_id, client_secret: client.client_secret, token_type: "Bearer", scope: "service.pos" },
    });
    const token = ((await login.json()) as { data: { access_token: string } }).data.access_token;
    const add = await mf.dispatchFetch("http://localhost/receipts/v2/add", {
      method: "POST",
      headers: { Authorization: `Bearer ${token}`, client_id: client.client_id, chain_id: "c1", app_user_id: "au-1", "Content-Type": "application/json" },
      body: "{}",
    });
    await add.arrayBuffer();
    expect(add.headers.get("ratelimit-policy")).toBe('"add.large";q=6000;w=10');
  }, 60_000);

  it("acting on an unknown client fails with status 1 and writes nothing", async () => {
    for (const command of ["show", "disable", "enable", "rotate"]) {
      const result = await clients(command, "pos-nobody");
      expect(result.status).toBe(1);
      expect(result.stderr).toContain("No client pos-nobody");
    }
    expect((await clients("tier", "pos-nobody", "large")).status).toBe(1);
    expect(await kvValue("pos-nobody")).toBeNull();
  });

  describe("bad arguments: a usage message, exit status 2, nothing written", () => {
    const cases: [string, string[]][] = [
      ["no command", []],
      ["an unknown command", ["create", "--chain", "c1"]],
      ["issue without --chain", ["issue", "--client-id", "pos-bad-1"]],
      ["issue with an unknown flag", ["issue", "--chain", "c1", "--client-id", "pos-bad-2", "--force"]],
      ["issue with --chain missing its value", ["issue", "--client-id", "pos-bad-3", "--chain"]],
      ["issue with an unusable client_id", ["issue", "--chain", "c1", "--client-id", "pos bad\t4"]],
      ["issue with an unusable chain", ["issue", "--chain", "", "--client-id", "pos-bad-5"]],
      ["issue with a stray argument", ["issue", "--chain", "c1", "--client-id", "pos-bad-6", "extra"]],
      ["show without an id", ["show"]],
      ["disable with two ids", ["disable", "a", "b"]],
      ["tier without a tier", ["tier", "pos-bad-7"]],
      ["tier with an unknown tier", ["tier", "pos-bad-8", "huge"]],
      ["--remote with --persist-to", ["list", "--remote"]],
    ];
    it.each(cases)("%s", async (_label, args) => {
      const result = await clients(...args);
      expect(result.status).toBe(2);
      expect(result.stderr).toContain("Usage: npm run clients --");
      expect(result.stdout).toBe("");
    });

    it("left no client behind", async () => {
      const ids = (JSON.parse((await clients("list", "--json")).stdout) as { client_id: string }[]).map((r) => r.client_id);
      expect(ids.filter((id) => id.startsWith("pos-bad"))).toEqual([]);
    });
  });
});

describe("docs/api.md#operators an issued client logs in against the real Worker; disable and rotate stop it", () => {
  const login = async (clientId: string, secret: string, scope = "service.pos") => {
    const response = await mf.dispatchFetch("http://localhost/receipts/v2/login", {
      method: "POST",
      headers: { client_id: clientId, client_secret: secret, token_type: "Bearer", scope },
    });
    return { status: response.status, body: (await response.json()) as Record<string, any> };
  };

  it("issue → 200; disable → 403; enable → 200; rotate → old secret 403, new secret 200", async () => {
    const client = await issued("--chain", "c1");
    const ok = await login(client.client_id, client.client_secret);
    expect(ok.status).toBe(200);
    expect(ok.body.data.token_type).toBe("Bearer");

    await clients("disable", client.client_id);
    expect((await login(client.client_id, client.client_secret)).status).toBe(403);
    await clients("enable", client.client_id);
    expect((await login(client.client_id, client.client_secret)).status).toBe(200);

    const rotated = JSON.parse((await clients("rotate", client.client_id, "--json")).stdout);
    expect((await login(client.client_id, client.client_secret)).status).toBe(403);
    expect((await login(client.client_id, rotated.client_secret)).status).toBe(200);
  }, 60_000);

  it("an --app client logs in with scope service.app (not service.pos) and reads the event feed", async () => {
    const app = await issued("--app");
    expect((await login(app.client_id, app.client_secret)).status).toBe(403);
    const { status, body } = await login(app.client_id, app.client_secret, "service.app");
    expect(status).toBe(200);
    const response = await mf.dispatchFetch("http://localhost/receipts/v2/events?limit=5", {
      headers: { Authorization: `Bearer ${body.data.access_token}`, client_id: app.client_id },
    });
    expect({ status: response.status, body: await response.json() }).toEqual({
      status: 200,
      body: { data: { events: [], next: null }, status: "OK", status_code: 200 },
    });
  }, 60_000);

  it("revocation (docs/api.md#revocation): tokens issued before disable or rotate are refused on delete, also after enable", async () => {
    const client = await issued("--chain", "c1");
    // No receipt exists under this ID: a token that passes every check gets 406, a revoked one 403.
    const remove = async (token: string) => {
      const response = await mf.dispatchFetch("http://localhost/receipts/v2/delete", {
        method: "POST",
        headers: { Authorization: `Bearer ${token}`, client_id: client.client_id, chain_id: "c1", app_user_id: "au-1", receipt_id: crypto.randomUUID() },
      });
      return { status: response.status, message: ((await response.json()) as { message: string }).message };
    };
    const first = (await login(client.client_id, client.client_secret)).body.data.access_token;
    expect((await remove(first)).status).toBe(406);

    await clients("disable", client.client_id);
    await clients("enable", client.client_id);
    expect(await remove(first)).toMatchObject({ status: 403, message: expect.stringContaining("generate a fresh token") });
    const second = (await login(client.client_id, client.client_secret)).body.data.access_token;
    expect((await remove(second)).status).toBe(406);

    const rotated = JSON.parse((await clients("rotate", client.client_id, "--json")).stdout);
    expect((await remove(second)).status).toBe(403);
    const third = (await login(client.client_id, rotated.client_secret)).body.data.access_token;
    expect((await remove(third)).status).toBe(406);
  }, 60_000);
});

describe("docs/api.md#operators npm run clients as a process, through wrangler", () => {
  // Read back through wrangler too: a Miniflare that has the namespace open does not see a
  // record that another process replaced.
  const shown = async (clientId: string) => {
    const result = await spawned("show", clientId, "--json");
    expect(result.status, result.stderr).toBe(0);
    return JSON.parse(result.stdout) as Record<string, unknown>;
  };
  const hashInKv = async (clientId: string) => {
    const args = ["kv", "key", "get", `client:${clientId}`, "--binding", "CLIENTS", "--text", "--local", "--persist-to", state];
    return (JSON.parse(await runWranglerAsync(args)) as { secret_hash: string }).secret_hash;
  };

  it("issue, show, list, disable, enable and rotate each write and read the local CLIENTS namespace", async () => {
    const issue = await spawned("issue", "--chain", "c1", "--client-id", "pos-spawned", "--json");
    expect(issue.stderr).toBe("");
    expect(issue.status).toBe(0);
    const client = JSON.parse(issue.stdout) as { client_id: string; client_secret: string };
    // Three reads of what issue wrote, at once.
    const [hash, show, list] = await Promise.all([hashInKv("pos-spawned"), shown("pos-spawned"), spawned("list", "--json")]);
    expect(hash).toBe(await hashClientSecret(client.client_secret));
    expect(show).toMatchObject({ client_id: "pos-spawned", chains: ["c1"], disabled: false });
    expect(list.status, list.stderr).toBe(0);
    expect((JSON.parse(list.stdout) as { client_id: string }[]).map((record) => record.client_id)).toContain("pos-spawned");

    expect((await spawned("disable", "pos-spawned")).status).toBe(0);
    expect(await shown("pos-spawned")).toMatchObject({ disabled: true });
    expect((await spawned("enable", "pos-spawned")).status).toBe(0);
    expect(await shown("pos-spawned")).toMatchObject({ disabled: false });
    const rotate = await spawned("rotate", "pos-spawned", "--json");
    expect(rotate.status, rotate.stderr).toBe(0);
    expect(await hashInKv("pos-spawned")).toBe(await hashClientSecret(JSON.parse(rotate.stdout).client_secret));
  }, PROCESSES_MS);

  it("bad arguments exit 2 with the usage; an unknown client exits 1", async () => {
    // Neither writes: at once.
    const [usage, unknown] = await Promise.all([spawned("issue", "--client-id", "pos-bad-0"), spawned("show", "pos-nobody")]);
    expect(usage.status).toBe(2);
    expect(usage.stderr).toContain("Usage: npm run clients --");
    expect(usage.stdout).toBe("");
    expect(unknown.status).toBe(1);
    expect(unknown.stderr).toContain("No client pos-nobody");
  }, 60_000);
});
