import type { ChildProcess } from "node:child_process";
import { once } from "node:events";
import { writeFileSync } from "node:fs";
import net from "node:net";
import path from "node:path";
import { decodeProtectedHeader } from "jose";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { freePort } from "../../harness/ports.ts";
import { newAuditHashKey } from "../../src/shared/audit-hash-key.ts";
import { newTokenKey } from "../../src/shared/token-keys.ts";
import { endGroup, startGroup, waitForWorker } from "../support/processes.ts";
import { freshState, runScript } from "../support/run-script.ts";

// wrangler dev, not the test runtime: only wrangler dev wraps the Worker in the middleware that
// drains an unread body before the answer may leave (docs/api.md#limits).
let dev: ChildProcess | undefined;
let port: number;
let addHeaders: string;

beforeAll(async () => {
  const state = freshState();
  const issued = runScript("clients", ["issue", "--chain", "c1", "--json", "--persist-to", state]);
  expect(issued.status, issued.stderr).toBe(0);
  const client = JSON.parse(issued.stdout) as { client_id: string; client_secret: string };
  // A key set of its own, so that the project's .dev.vars (which npm start may be writing) plays no part.
  const key = newTokenKey();
  const envFile = path.join(state, ".env");
  writeFileSync(envFile, `TOKEN_KEYS='${JSON.stringify({ keys: [key] })}'\nAUDIT_HASH_KEY='${newAuditHashKey()}'\n`, { mode: 0o600 });
  port = await freePort();
  // An inspector port of its own: another test's npm start may be starting at the same moment.
  const inspectorPort = await freePort();
  const started = startGroup("wrangler", ["dev", "--ip", "127.0.0.1", "--port", String(port), "--inspector-port", String(inspectorPort), "--persist-to", state, "--env-file", envFile]);
  dev = started.child;
  await waitForWorker(port, started.output);

  const login = await fetch(`http://127.0.0.1:${port}/receipts/v2/login`, {
    method: "POST",
    headers: { client_id: client.client_id, client_secret: client.client_secret, token_type: "Bearer", scope: "service.pos" },
  });
  const token = ((await login.json()) as { data: { access_token: string } }).data.access_token;
  expect(decodeProtectedHeader(token).kid).toBe(key.kid);
  addHeaders = `Authorization: Bearer ${token}\r\nclient_id: ${client.client_id}\r\nchain_id: c1\r\napp_user_id: au-1\r\nContent-Type: application/json\r\n`;
}, 120_000);

afterAll(async () => {
  if (dev) await endGroup(dev);
});

describe("a body that never arrives holds no answer on wrangler dev: docs/api.md#limits", () => {
  it.each([
    { name: "login", target: "/receipts/v2/login", length: 1_000, status: 400 },
    { name: "delete", target: "/receipts/v2/delete", length: 1_000, status: 400 },
    { name: "an unknown path", target: "/receipts/v2/nowhere", length: 1_000, status: 404 },
    { name: "add refused on its declared length", target: "/receipts/v2/add", length: 70_000, status: 413 },
  ])("$name answers at once when the declared body (Content-Length $length) never comes", async ({ target, length, status }) => {
    const headers = `${target.endsWith("/add") ? addHeaders : ""}Content-Length: ${length}\r\n`;
    const started = Date.now();
    const statusLine = await firstLine(`POST ${target} HTTP/1.1\r\nHost: 127.0.0.1\r\n${headers}\r\n`, 5_000);
    expect(statusLine).toMatch(new RegExp(`^HTTP/1\\.1 ${status} `));
    expect(Date.now() - started).toBeLessThan(5_000);
  });
});

/** Sends `request` on a raw connection and nothing after it; returns the answer's status line. */
async function firstLine(request: string, timeoutMs: number): Promise<string> {
  const socket = net.connect(port, "127.0.0.1");
  try {
    await once(socket, "connect");
    socket.write(request);
    let received = "";
    const answered = new Promise<string>((resolve, reject) => {
      socket.on("data", (chunk: Buffer) => {
        received += chunk.toString("latin1");
        if (received.includes("\r\n")) resolve(received.slice(0, received.indexOf("\r\n")));
      });
      socket.on("error", reject);
    });
    const timeout = new Promise<string>((resolve) => setTimeout(() => resolve(`no answer within ${timeoutMs} ms`), timeoutMs));
    return await Promise.race([answered, timeout]);
  } finally {
    socket.destroy();
  }
}
