/** What every operator command shares: argument parsing and the usage exit (status 2). */
import { parseArgs, type ParseArgsConfig } from "node:util";

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

/**
 * Runs a command's main function: a UsageError prints the usage and exits 2, any other failure
 * prints its message and exits 1.
 */
export async function runCli(usage: string, main: (args: string[]) => Promise<void> | void): Promise<void> {
  try {
    await main(process.argv.slice(2));
  } catch (error) {
    if (error instanceof UsageError) {
      console.error(`${error.message}\n\n${usage}`);
      process.exit(2);
    }
    console.error((error as Error).message);
    process.exit(1);
  }
}
