import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { once } from "node:events";
import net from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { ROOT, freshState } from "./run-script.ts";

let started: ChildProcess | undefined;

// Whatever a failing run leaves behind is this test's own process group: end it, and only it.
afterEach(() => {
  if (started?.pid !== undefined && groupMembers(started.pid).length > 0) process.kill(-started.pid, "SIGKILL");
  started = undefined;
});

describe("issue 11.11 npm start stops everything it started: README.md#run-it-locally", () => {
  it.each(["SIGTERM", "SIGINT"] as const)(
    "%s to npm alone (as a container stop or process manager sends it) ends wrangler dev and both workerd, freeing the port",
    async (signal) => {
      const port = await freePort();
      // Its own process group, so that the test can see (and in the end clean up) every descendant.
      started = spawn("npm", ["start", "--", "--port", String(port), "--persist-to", freshState()], {
        cwd: ROOT,
        detached: true,
        stdio: ["ignore", "pipe", "pipe"],
        env: { ...process.env, NO_COLOR: "1", WRANGLER_SEND_METRICS: "false" },
      });
      let output = "";
      for (const stream of [started.stdout!, started.stderr!]) stream.on("data", (chunk: Buffer) => void (output += chunk));
      const npm = started.pid!;

      await waitFor(async () => (await fetch(`http://127.0.0.1:${port}/`).catch(() => null))?.status === 404, 90_000, () => output);
      expect(groupMembers(npm).filter((command) => command.includes("workerd"))).toHaveLength(2);

      process.kill(npm, signal);
      await once(started, "exit");
      await waitFor(async () => groupMembers(npm).length === 0, 15_000, () => groupMembers(npm).join("\n"));
      expect(await portIsFree(port)).toBe(true);
    },
    150_000,
  );
});

/** The commands still running in process group `group`. */
function groupMembers(group: number): string[] {
  const table = execFileSync("ps", ["-eo", "pgid=,args="], { encoding: "utf8" });
  return table
    .split("\n")
    .map((line) => /^\s*(\d+)\s+(.*)$/.exec(line))
    .filter((match) => match !== null && Number(match[1]) === group)
    .map((match) => match![2]!);
}

async function waitFor(condition: () => Promise<boolean>, timeoutMs: number, detail: () => string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`still waiting after ${timeoutMs} ms:\n${detail()}`);
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}

async function freePort(): Promise<number> {
  const server = net.createServer().listen(0, "127.0.0.1");
  await once(server, "listening");
  const { port } = server.address() as net.AddressInfo;
  server.close();
  await once(server, "close");
  return port;
}

async function portIsFree(port: number): Promise<boolean> {
  const server = net.createServer();
  try {
    server.listen(port, "127.0.0.1");
    await once(server, "listening");
    return true;
  } catch {
    return false;
  } finally {
    server.close();
  }
}
