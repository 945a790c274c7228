import path from "node:path";
import { describe, expect, it } from "vitest";
import { readConfigFile } from "../../scripts/lib/config.ts";

const root = path.join(import.meta.dirname, "../..");

describe("structured logs: Workers Logs is on for both Workers", () => {
  it.each(["wrangler.jsonc", "src/notifier/wrangler.jsonc"])("%s enables observability", (file) => {
    expect(readConfigFile(path.join(root, file)).observability).toEqual({ enabled: true });
  });
});
