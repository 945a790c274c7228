import type { ChildProcess } from "node:child_process";
import { once } from "node:events";
import { afterEach, describe, expect, it } from "vitest";
import { freePort, endGroup, groupMembers, portIsFree, startGroup, waitFor, waitForWorker } from "../support/processes.ts";
import { freshState } from "../support/run-script.ts";

let started: ChildProcess | undefined;

// Whatever a failing run leaves behind is this test's own process group: end it, and only it.
afterEach(async () => {
  if (started) await endGroup(started);
  started = undefined;
});

describe("npm start stops everything it started: docs/api.md#local-use", () => {
  it.each(["SIGTERM", "SIGINT"] as const)(
    "%s to npm alone (as a container stop or process manager sends it) ends wrangler dev and both workerd, freeing the port",
    async (signal) => {
      const port = await freePort();
      const { child, output } = startGroup("npm", ["start", "--", "--port", String(port), "--persist-to", freshState()]);
      started = child;
      await waitForWorker(port, output);
      const npm = child.pid!;
      expect(groupMembers(npm).filter((command) => command.includes("workerd"))).toHaveLength(2);

      process.kill(npm, signal);
      await once(child, "exit");
      await waitFor(async () => groupMembers(npm).length === 0, 15_000, () => groupMembers(npm).join("\n"));
      expect(await portIsFree(port)).toBe(true);
    },
    150_000,
  );
});
