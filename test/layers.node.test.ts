/**
 * The layers of src/, read from its import lines: src/shared at the bottom, src/storage (and the
 * client package) on it, the two Workers on top, neither importing the other; inside the API
 * Worker, the modules its subfolders build on (context.ts, refusals.ts, …) import nothing from
 * those subfolders; and no module reaches itself through its imports. src/storage's subfolders
 * group a tier's tables (archive/, outbox/), whose plain statements the shard's own modules build
 * on and whose steps build on those, so there the cycle check is the rule. SQL on the outbox's
 * tables is written in src/storage/outbox/ alone.
 */
import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";

const ROOT = path.join(import.meta.dirname, "..");

/** What each top folder of src/ may import besides itself. */
const MAY_IMPORT: Record<string, string[]> = {
  shared: [],
  storage: ["shared"],
  client: ["shared"],
  api: ["shared", "storage"],
  notifier: ["shared", "storage"],
};

// `import … from`, `export … from`, a bare `import "…"` and a dynamic `import("…")`.
const IMPORT = /(?:(?:^|\n)\s*(?:import|export)\s[^;]*?\sfrom\s*|(?:^|\n)\s*import\s*|\bimport\(\s*)["'](\.[^"']+)["']/g;

/** The modules of src/, as paths from the repository's root. */
const MODULES = readdirSync(path.join(ROOT, "src"), { recursive: true, encoding: "utf8" })
  .filter((file) => file.endsWith(".ts") && !file.endsWith(".d.ts"))
  .map((file) => path.join("src", file));

/** Every relative import of a module of src/ that lands in src/. */
function importsOfSrc(): { from: string; to: string }[] {
  return MODULES.flatMap((from) =>
    [...readFileSync(path.join(ROOT, from), "utf8").matchAll(IMPORT)]
      .map((match) => path.normalize(path.join(path.dirname(from), match[1] ?? "")))
      .filter((to) => to.startsWith("src/"))
      .map((to) => ({ from, to })),
  );
}

const topOf = (file: string) => file.split("/")[1] ?? "";

describe("src/ imports run downward", () => {
  const imports = importsOfSrc();

  it("finds the imports it judges", () => {
    expect(imports.length).toBeGreaterThan(200);
  });

  it("a top folder imports only itself and the layers below it", () => {
    const upward = imports.filter(({ from, to }) => topOf(from) !== topOf(to) && !MAY_IMPORT[topOf(from)]?.includes(topOf(to)));
    expect(upward).toEqual([]);
  });

  it("a module of src/api that a subfolder builds on imports nothing from a subfolder", () => {
    const api = imports.filter(({ from, to }) => from.startsWith("src/api/") && to.startsWith("src/api/"));
    const isRoot = (file: string) => path.dirname(file) === "src/api";
    const builtOn = new Set(api.filter(({ from, to }) => !isRoot(from) && isRoot(to)).map(({ to }) => to));
    expect(api.filter(({ from, to }) => builtOn.has(from) && !isRoot(to))).toEqual([]);
  });

  it("no module of src/ reaches itself through its imports", () => {
    const next = new Map<string, string[]>();
    for (const { from, to } of imports) next.set(from, [...(next.get(from) ?? []), to]);
    const cycles: string[][] = [];
    const done = new Set<string>();
    const visit = (file: string, trail: string[]) => {
      if (trail.includes(file)) return void cycles.push([...trail.slice(trail.indexOf(file)), file]);
      if (done.has(file)) return;
      for (const to of next.get(file) ?? []) visit(to, [...trail, file]);
      done.add(file);
    };
    for (const file of next.keys()) visit(file, []);
    expect(cycles).toEqual([]);
  });
});

describe("src/ keeps a table's SQL with the module that owns it", () => {
  it("SQL on the outbox's tables is written only in src/storage/outbox/", () => {
    const outboxSql = /\b(?:FROM|INTO|UPDATE|JOIN)\s+(?:notice_outbox|failed_notices|push_endpoint|event_records)\b/;
    const elsewhere = MODULES.filter((file) => !file.startsWith("src/storage/outbox/") && outboxSql.test(readFileSync(path.join(ROOT, file), "utf8")));
    expect(elsewhere).toEqual([]);
  });
});
