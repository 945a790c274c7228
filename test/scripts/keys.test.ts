import { readFileSync, statSync, writeFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { parseAuditHashKey } from "../../src/shared/audit-hash-key.ts";
import { parseTokenKeys } from "../../src/shared/config.ts";
import { freshState, runScript } from "../support/run-script.ts";

describe("docs/api.md#operators npm run keys", () => {
  it("new prints a key set the Worker accepts: one HS256 key of 256 bits with a kid", () => {
    const result = runScript("keys", ["new"]);
    expect(result.status).toBe(0);
    const set = JSON.parse(result.stdout);
    expect(set.keys).toHaveLength(1);
    expect(set.keys[0]).toMatchObject({ kty: "oct", alg: "HS256", kid: expect.any(String) });
    expect(Buffer.from(set.keys[0].k, "base64url").byteLength).toBe(32);
    expect(parseTokenKeys(result.stdout)).toHaveLength(1);
  });

  it("new --from puts a fresh signing key in front and keeps the old ones verifying", () => {
    const old = runScript("keys", ["new"]).stdout;
    const file = path.join(freshState(), "keys.json");
    writeFileSync(file, old);
    const fromFile = JSON.parse(runScript("keys", ["new", "--from", file]).stdout);
    const fromStdin = JSON.parse(runScript("keys", ["new", "--from", "-"], old).stdout);
    for (const set of [fromFile, fromStdin]) {
      expect(set.keys).toHaveLength(2);
      expect(set.keys[1]).toEqual(JSON.parse(old).keys[0]);
      expect(set.keys[0].kid).not.toBe(set.keys[1].kid);
    }
  });

  it("docs/api.md#erasure audit prints a fresh AUDIT_HASH_KEY of 32 bytes, which the erasure accepts", () => {
    const first = runScript("keys", ["audit"]);
    expect(first.status).toBe(0);
    const key = first.stdout.trim();
    expect(parseAuditHashKey(key)).toHaveLength(32);
    expect(runScript("keys", ["audit"]).stdout.trim()).not.toBe(key);
  });

  it("docs/operations.md#deploy-from-zero files writes both Workers' secrets files, readable by the operator alone, never printing them, and never overwrites", () => {
    const dir = path.join(freshState(), "secrets");
    const result = runScript("keys", ["files", "--push-url", "https://push.example.com/receipts", "--dir", dir]);
    expect(result.status, result.stderr).toBe(0);
    const api = JSON.parse(readFileSync(path.join(dir, "api.json"), "utf8")) as Record<string, string>;
    const notifier = JSON.parse(readFileSync(path.join(dir, "notifier.json"), "utf8")) as Record<string, string>;
    expect(Object.keys(api).sort()).toEqual(["AUDIT_HASH_KEY", "TOKEN_KEYS"]);
    expect(parseTokenKeys(api.TOKEN_KEYS!)).toHaveLength(1);
    expect(parseAuditHashKey(api.AUDIT_HASH_KEY!)).toHaveLength(32);
    expect(notifier).toEqual({ APP_PUSH_URL: "https://push.example.com/receipts", APP_PUSH_SECRET: expect.stringMatching(/^whsec_[A-Za-z0-9+/]{43}=$/) });
    for (const file of ["api.json", "notifier.json"]) expect(statSync(path.join(dir, file)).mode & 0o777).toBe(0o600);
    for (const value of [...Object.values(api), notifier.APP_PUSH_SECRET!]) expect(result.stdout + result.stderr).not.toContain(value);

    const again = runScript("keys", ["files", "--push-url", "https://push.example.com/other", "--dir", dir]);
    expect(again.status).toBe(1);
    expect(again.stderr).toContain("exist already");
    expect(readFileSync(path.join(dir, "api.json"), "utf8")).toContain(api.AUDIT_HASH_KEY!);
    expect(runScript("keys", ["files", "--dir", dir]).status).toBe(2);
    expect(runScript("keys", ["files", "--push-url", "http://push.example.com", "--dir", dir]).status).toBe(2);
  });

  it.each([
    ["no command", []],
    ["an argument to audit", ["audit", "64"]],
    ["an unknown command", ["rotate"]],
    ["an unknown flag", ["new", "--size", "512"]],
    ["a key set that is not one", ["new", "--from", "-"]],
  ])("bad arguments (%s): usage and exit status 2", (_label, args) => {
    const result = runScript("keys", args as string[], "{}");
    expect(result.status).toBe(2);
    expect(result.stderr).toContain("Usage: npm run keys --");
    expect(result.stdout).toBe("");
  });
});
