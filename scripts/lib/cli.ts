/** What every operator command shares: argument parsing and the usage exit (status 2). */
import { parseArgs, type ParseArgsConfig } from "node:util";
import { identifyingText } from "../../src/shared/schemas.ts";

/** Thrown for bad arguments; `runCli` prints the usage and exits 2 without writing anything. */
export class UsageError extends Error {}

/** Parses arguments strictly: an unknown flag or a missing value is a UsageError. */
export function parse<T extends ParseArgsConfig["options"]>(args: string[], options: T) {
  try {
    return parseArgs({ args, options, allowPositionals: true, strict: true });
  } catch (error) {
    throw new UsageError((error as Error).message);
  }
}

/** Reads a flag's value as a whole number of at least 1; anything else is a UsageError. */
export function positiveInteger(flag: string, text: string): number {
  const value = Number(text);
  if (!Number.isInteger(value) || value < 1) throw new UsageError(`${flag} must be a positive whole number, not ${text}`);
  return value;
}

/**
 * Checks an ID (client_id, chain_id, app_user_id, receipt_id) that POS requests carry as an
 * identifying header value: one that no request could carry as given is a UsageError, so nothing
 * is written for a client that can never log in or add. The identifying-header rule
 * (docs/api.md#common-rules) is the API's own schema, comma included; beyond it this refuses
 * white space at either end, which HTTP strips, and a leading "-", which a later command would
 * read as an option (`disable --remote` names no client but the deployed namespace);
 * `optionLike` allows that for an ID the command takes after `--`.
 *
 * @example usableId("--client-id", values["client-id"]) // returns the value, or throws UsageError
 */
export function usableId(flag: string, value: string, { optionLike = false } = {}): string {
  const result = identifyingText.safeParse(value);
  const problem = !result.success
    ? result.error.issues[0]!.message
    : value !== value.trim()
      ? "has white space at either end, which HTTP strips"
      : value.startsWith("-") && !optionLike
        ? "starts with '-' and would read as an option"
        : null;
  if (problem) throw new UsageError(`${flag} ${problem}: ${JSON.stringify(value)}`);
  return value;
}

/**
 * Runs a command's main function: `--help` or `-h` prints the usage (exit 0), a UsageError prints
 * it and exits 2, any other failure prints its message and exits 1.
 */
export async function runCli(usage: string, main: (args: string[]) => Promise<void> | void): Promise<void> {
  const status = await cliStatus(usage, main, process.argv.slice(2));
  // What a command opened (a local state's runtime) would otherwise keep the process running.
  await Promise.all(closers.splice(0).map((close) => close()));
  if (status !== 0) process.exit(status);
}

const closers: (() => Promise<void>)[] = [];

/**
 * Has `runCli` call `close` when the command ends, whatever its outcome. Commands run in-process
 * by the tests (`cliStatus`) leave it open for the next one; the tests close it themselves.
 */
export function atCommandEnd(close: () => Promise<void>): void {
  if (!closers.includes(close)) closers.push(close);
}

/**
 * What {@link runCli} does for `argv`, returning the exit status instead of exiting: the tests
 * run a command in-process with it.
 */
export async function cliStatus(usage: string, main: (args: string[]) => Promise<void> | void, argv: string[]): Promise<number> {
  if (asksForHelp(argv)) {
    console.log(usage);
    return 0;
  }
  try {
    await main(argv);
    return 0;
  } catch (error) {
    if (error instanceof UsageError) {
      console.error(`${error.message}\n\n${usage}`);
      return 2;
    }
    console.error((error as Error).message);
    return 1;
  }
}

/**
 * Runs an operator script of several commands: the first argument names the command, the rest
 * go to it; an unknown or missing command is a UsageError.
 *
 * @example await runCommands(USAGE, { list: (args) => list(args), close: (args) => setState("close", args) });
 */
export async function runCommands(usage: string, commands: Commands): Promise<void> {
  await runCli(usage, (argv) => dispatch(commands, argv));
}

/** An operator script's commands by name, each taking the arguments after its name. */
export type Commands = Record<string, (args: string[]) => Promise<void> | void>;

/** Runs the command that `argv` names with the rest of it; an unknown or missing one is a UsageError. */
export function dispatch(commands: Commands, argv: string[]): Promise<void> | void {
  const [command, ...rest] = argv;
  const run = command === undefined ? undefined : Object.hasOwn(commands, command) ? commands[command] : undefined;
  if (!run) throw new UsageError(command ? `Unknown command: ${command}` : "No command given.");
  return run(rest);
}

/**
 * Whether the arguments ask for the usage: `--help` or `-h` anywhere before a `--`, after which
 * every argument is a value (an app_user_id may well be "-h").
 */
export function asksForHelp(argv: readonly string[]): boolean {
  const end = argv.indexOf("--");
  return (end === -1 ? argv : argv.slice(0, end)).some((arg) => arg === "--help" || arg === "-h");
}

/**
 * Rows as plain text for a person: a header row, then one line per row, each column padded to
 * its widest cell and two spaces apart. Scripts that read the output use --json instead.
 *
 * @example table(["CLIENT_ID", "STATE"], [["pos-1", "enabled"]]) // "CLIENT_ID  STATE\npos-1      enabled"
 */
export function table(header: readonly string[], rows: readonly (readonly string[])[]): string {
  const widths = header.map((cell, i) => Math.max(cell.length, ...rows.map((row) => row[i]!.length)));
  return [header, ...rows].map((row) => row.map((cell, i) => cell.padEnd(widths[i]!)).join("  ").trimEnd()).join("\n");
}
