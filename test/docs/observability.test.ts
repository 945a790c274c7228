import { readFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";

const root = path.join(import.meta.dirname, "../..");

describe("structured logs: Workers Logs is on for both Workers", () => {
  it.each(["wrangler.toml", "src/notifier/wrangler.toml"])("%s enables [observability]", (file) => {
    const config = readFileSync(path.join(root, file), "utf8");
    expect(config).toMatch(/^\[observability\]\r?\nenabled = true$/m);
  });
});
