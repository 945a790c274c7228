/**
 * The rule a new migration keeps (docs/storage.md "Migrations while the service runs"): a release
 * migrates every shard first and deploys second, so between the two the code of the previous
 * release runs against the new schema. A migration may therefore not drop or rename a table, a
 * view or a column that the previous release's code still reads. This finds, in a migration's SQL,
 * every name it takes away; `git grep` at the previous commit tells whether that code reads it.
 */
import { spawnSync } from "node:child_process";

/** A name a migration takes away, and how. */
export interface RemovedName {
  kind: "table" | "view" | "column";
  name: string;
  /** The table a column belongs to; undefined for a table or a view. */
  table?: string;
  how: "DROP" | "RENAME";
}

/** A removed name that the previous code reads, and the files that read it. */
export interface Breaking extends RemovedName {
  migration: string;
  readBy: string[];
}

const IDENT = String.raw`(?:"[^"]+"|\[[^\]]+\]|\x60[^\x60]+\x60|[A-Za-z_][A-Za-z0-9_$]*)`;
const DROP_OBJECT = new RegExp(String.raw`^DROP\s+(TABLE|VIEW)\s+(?:IF\s+EXISTS\s+)?(${IDENT})`, "i");
const ALTER = new RegExp(String.raw`^ALTER\s+TABLE\s+(${IDENT})\s+(.*)$`, "is");
const DROP_COLUMN = new RegExp(String.raw`^DROP\s+(?:COLUMN\s+)?(${IDENT})`, "i");
const RENAME_TABLE = new RegExp(String.raw`^RENAME\s+TO\s+(${IDENT})`, "i");
const RENAME_COLUMN = new RegExp(String.raw`^RENAME\s+(?:COLUMN\s+)?(${IDENT})\s+TO\s+(${IDENT})`, "i");
const CREATE_OBJECT = new RegExp(String.raw`^CREATE\s+(?:TEMP\s+|TEMPORARY\s+)?(?:TABLE|VIEW)\s+(?:IF\s+NOT\s+EXISTS\s+)?(${IDENT})`, "i");

/**
 * The tables, views and columns a migration's SQL takes away. A table dropped and made again under
 * its own name in the same migration (SQLite's rebuild: create a copy, fill it, drop the old,
 * rename the copy) keeps its name, so it is not among them; the columns such a rebuild leaves out
 * are not seen (the rule in docs/storage.md says so).
 *
 * @example removedNames("ALTER TABLE receipts DROP COLUMN body;") // [{ kind: "column", name: "body", table: "receipts", how: "DROP" }]
 */
export function removedNames(sql: string): RemovedName[] {
  const removed: RemovedName[] = [];
  const made = new Set<string>();
  for (const text of statements(sql)) {
    const create = CREATE_OBJECT.exec(text);
    if (create) made.add(unquoted(create[1]!).toLowerCase());
    const drop = DROP_OBJECT.exec(text);
    if (drop) removed.push({ kind: drop[1]!.toLowerCase() as "table" | "view", name: unquoted(drop[2]!), how: "DROP" });
    const alter = ALTER.exec(text);
    if (!alter) continue;
    const table = unquoted(alter[1]!);
    const action = alter[2]!.trim();
    const renameTable = RENAME_TABLE.exec(action);
    const renameColumn = RENAME_COLUMN.exec(action);
    const dropColumn = DROP_COLUMN.exec(action);
    if (renameTable) {
      removed.push({ kind: "table", name: table, how: "RENAME" });
      made.add(unquoted(renameTable[1]!).toLowerCase());
    } else if (renameColumn) {
      removed.push({ kind: "column", name: unquoted(renameColumn[1]!), table, how: "RENAME" });
    } else if (dropColumn) {
      removed.push({ kind: "column", name: unquoted(dropColumn[1]!), table, how: "DROP" });
    }
  }
  return removed.filter((each) => each.kind === "column" || !made.has(each.name.toLowerCase()));
}

/** The SQL's statements, comments out, white space folded. Migrations hold no `;` inside strings but in triggers, whose bodies drop nothing. */
function statements(sql: string): string[] {
  const bare = sql.replace(/--[^\n]*/g, " ").replace(/\/\*[\s\S]*?\*\//g, " ");
  return bare
    .split(";")
    .map((text) => text.replace(/\s+/g, " ").trim())
    .filter((text) => text !== "");
}

function unquoted(name: string): string {
  return /^["[`]/.test(name) ? name.slice(1, -1) : name;
}

/** Runs git in `cwd`; throws with its error output on failure. */
function git(cwd: string, args: string[]): { status: number; stdout: string } {
  const result = spawnSync("git", args, { cwd, encoding: "utf8" });
  if (result.error) throw result.error;
  if (result.status !== 0 && result.status !== 1) throw new Error(`git ${args.join(" ")} failed:\n${result.stderr}`);
  return { status: result.status, stdout: result.stdout };
}

/** The migration files under `dir` in the working tree that `base` does not have. */
export function newMigrations(root: string, base: string, dir = "migrations"): string[] {
  if (git(root, ["rev-parse", "--verify", "--quiet", `${base}^{commit}`]).status !== 0) {
    throw new Error(`No commit ${base} to compare the migrations with: give --base <ref> (the release that is deployed).`);
  }
  const before = new Set(git(root, ["ls-tree", "--name-only", `${base}:${dir}`]).stdout.split("\n").filter(Boolean));
  const now = git(root, ["ls-files", "--cached", "--others", "--exclude-standard", "--", dir]).stdout.split("\n").filter(Boolean);
  return now.filter((file) => file.endsWith(".sql") && !before.has(file.slice(dir.length + 1))).sort();
}

/** The files of `paths` at commit `base` that name `word` as a whole word, any case. */
export function filesReading(root: string, base: string, word: string, paths: readonly string[]): string[] {
  const { stdout } = git(root, ["grep", "-l", "-w", "-i", "-F", "-e", word, base, "--", ...paths]);
  return stdout.split("\n").filter(Boolean).map((line) => line.slice(base.length + 1));
}

/**
 * Every name that a migration new since `base` takes away while the code at `base` (under
 * `codePaths`) reads it: what would break between a release's migration and its deploy.
 */
export function breakingMigrations(
  root: string,
  base: string,
  readSql: (file: string) => string,
  codePaths: readonly string[] = ["src"],
): Breaking[] {
  return newMigrations(root, base).flatMap((migration) =>
    removedNames(readSql(migration)).flatMap((removed) => {
      const readBy = filesReading(root, base, removed.name, codePaths);
      return readBy.length > 0 ? [{ ...removed, migration, readBy }] : [];
    }),
  );
}

/** One line an operator or CI log reads for a breaking change. */
export function describeBreaking(each: Breaking, base: string): string {
  const what = each.kind === "column" ? `column ${each.table}.${each.name}` : `${each.kind} ${each.name}`;
  return (
    `${each.migration}: ${each.how === "DROP" ? "drops" : "renames"} ${what}, which the code at ${base} still reads ` +
    `(${each.readBy.join(", ")}). A release migrates before it deploys, so that code would fail until the deploy; ` +
    "stop reading it in one release and take it away in a later one (docs/storage.md)."
  );
}
