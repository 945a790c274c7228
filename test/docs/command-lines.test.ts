/**
 * Every command line README.md and docs/*.md give works as written (npm 11): npm takes every flag
 * written after `npm run <script>` and before a `--` for itself, so `npm run status --remote`
 * runs the local status and never tells. Each `npm run`, `npm start` and `npm test` line in
 * their code (fenced blocks and inline code) must name a script of package.json, pass its flags
 * after a `--`, and, for an operator script, name only flags and commands its own usage names.
 */
import { readFileSync, readdirSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { ROOT } from "../support/run-script.ts";

const SCRIPTS = (JSON.parse(readFileSync(path.join(ROOT, "package.json"), "utf8")) as { scripts: Record<string, string> }).scripts;
const DOCUMENTS = ["README.md", ...readdirSync(path.join(ROOT, "docs")).filter((name) => name.endsWith(".md")).map((name) => `docs/${name}`)];

/** A command line as a document gives it, where it stands. */
interface CommandLine {
  where: string;
  text: string;
}

// `npm run` with npm's own flags and a script's name, `npm start` or `npm test`, as a word of its own;
// `npm run` alone names the tool, not a command.
const COMMAND = /\bnpm (?:run(?:\s+--?[a-z]+)*\s+[a-z][\w-]*(?::[\w-]+)?|start|test)(?=\s|$)/g;

/** Every npm command line in the code of a Markdown document: its fenced blocks' lines and its inline code. */
function commandLines(document: string): CommandLine[] {
  const found: CommandLine[] = [];
  let fenced = false;
  readFileSync(path.join(ROOT, document), "utf8")
    .split("\n")
    .forEach((line, index) => {
      if (/^\s*```/.test(line)) {
        fenced = !fenced;
        return;
      }
      const codes = fenced ? [line] : [...line.matchAll(/`([^`]+)`/g)].map((match) => match[1]!);
      for (const code of codes) {
        // A shell comment says what a command does; a command ends where a redirection, pipe or list begins.
        const shell = code.split(/(?:^|\s)#/)[0]!;
        for (const match of shell.matchAll(COMMAND)) {
          found.push({ where: `${document}:${index + 1}`, text: shell.slice(match.index).split(/\s(?:>|\||&&|;)|\$\(/)[0]!.trim() });
        }
      }
    });
  return found;
}

/** A command line read as npm reads it: the script, what npm keeps, and what reaches the script. */
interface ReadCommand {
  script: string;
  /** Flags npm takes for itself: written after the script's name and before a `--`. */
  eaten: string[];
  /** The words after the first `--`, up to a second `--` (after which every word is a value). */
  passed: string[];
}

// A usage line's brackets and alternatives around a word are no part of it.
const bare = (token: string) => token.replace(/^[[(]+|[\])]+$/g, "");
const isFlag = (token: string) => /^--?[A-Za-z]/.test(token);

function readCommand(text: string): ReadCommand {
  const words = text.split(/\s+/).map(bare).filter((word) => word !== "" && word !== "|");
  let at = 2;
  let script = words[1]!;
  if (script === "run") {
    // npm's own flags between `run` and the script's name are meant for npm (`npm run -s keys`).
    while (isFlag(words[at] ?? "")) at += 1;
    script = words[at++] ?? "";
  }
  const separator = words.indexOf("--", at);
  const before = separator === -1 ? words.slice(at) : words.slice(at, separator);
  const after = separator === -1 ? [] : words.slice(separator + 1);
  const end = after.indexOf("--");
  return { script, eaten: before.filter(isFlag), passed: end === -1 ? after : after.slice(0, end) };
}

const LINES = DOCUMENTS.flatMap(commandLines);

// The usage of an operator script as its source writes it: the script and the modules of
// scripts/lib it imports (where a script with commands keeps theirs). Read, not run: a start of
// Node with its imports takes seconds, and a script that takes no --help would run.
function usageOf(file: string): string {
  const source = readFileSync(path.join(ROOT, file), "utf8");
  const libraries = [...source.matchAll(/from "(\.\/lib\/[\w-]+\.ts)"/g)].map(([, lib]) => readFileSync(path.join(ROOT, path.dirname(file), lib!), "utf8"));
  return [source, ...libraries].join("\n");
}

// The file an operator script (`exec node scripts/<name>.ts`) runs; `npm start` is the service.
function scriptFile(script: string): string | undefined {
  const file = /^exec node (scripts\/\S+\.ts)$/.exec(SCRIPTS[script] ?? "")?.[1];
  return file && file !== "scripts/start.ts" ? file : undefined;
}

const mentions = (usage: string, word: string) => new RegExp(`(^|[^\\w-])${word.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}(?![\\w-])`, "m").test(usage);

describe("README.md and docs/*.md: every npm command line works as written with npm 11", () => {
  it("finds the command lines of every document", () => {
    expect(LINES.length).toBeGreaterThan(100);
    for (const document of ["README.md", "docs/api.md", "docs/operations.md"]) expect(LINES.some(({ where }) => where.startsWith(document))).toBe(true);
  });

  it("names a script of package.json in each", () => {
    const unknown = LINES.filter(({ text }) => !Object.hasOwn(SCRIPTS, readCommand(text).script));
    expect(unknown.map(({ where, text }) => `${where}: ${text}`)).toEqual([]);
  });

  it("passes every flag meant for the script after `--`, where npm leaves it to the script", () => {
    const eaten = LINES.filter(({ text }) => readCommand(text).eaten.length > 0);
    expect(eaten.map(({ where, text }) => `${where}: ${text}`)).toEqual([]);
  });

  it("gives an operator script only the flags and commands its own usage names", () => {
    const unknown: string[] = [];
    for (const { where, text } of LINES) {
      const { script, passed } = readCommand(text);
      const file = scriptFile(script);
      if (!file) continue;
      const usage = usageOf(file);
      const flags = passed.filter(isFlag).map((flag) => flag.split("=")[0]!).filter((flag) => flag !== "--help" && flag !== "-h");
      const command = passed[0] !== undefined && /^[a-z][\w-]*$/.test(passed[0]) ? [passed[0]] : [];
      for (const word of [...command, ...flags]) if (!mentions(usage, word)) unknown.push(`${where}: ${word} in ${text}`);
    }
    expect(unknown).toEqual([]);
  });

  it("reads a command as npm does: flags before `--` are npm's, after it the script's, and after a second `--` values", () => {
    expect(readCommand("npm run status --remote")).toEqual({ script: "status", eaten: ["--remote"], passed: [] });
    expect(readCommand("npm run status -- [--json] [--remote]")).toEqual({ script: "status", eaten: [], passed: ["--json", "--remote"] });
    expect(readCommand("npm run -s keys -- audit")).toEqual({ script: "keys", eaten: [], passed: ["audit"] });
    expect(readCommand("npm run app-users -- erase --remote -- -au-7")).toEqual({ script: "app-users", eaten: [], passed: ["erase", "--remote"] });
    expect(readCommand("npm start -- --port 9000")).toEqual({ script: "start", eaten: [], passed: ["--port", "9000"] });
  });
});
