/** How a body check words a field of the wrong type (docs/api.md#add-body). */
import type * as z from "zod/mini";

const NOUNS: Record<string, string> = {
  string: "a string",
  number: "a number",
  array: "an array",
  object: "a JSON object",
  record: "a JSON object",
};

/**
 * Words a type error, which the schemas leave to the reader of the issues: `is missing`, `must be
 * a number`. The error map of every body check, and of a check inside one that parses on its own.
 */
export function plainMessage(issue: z.core.$ZodRawIssue): string | undefined {
  if (issue.code !== "invalid_type") return undefined;
  const noun = NOUNS[issue.expected] ?? issue.expected;
  if (issue.input === undefined) return "is missing";
  if (issue.input === null) return `must be ${noun}, not null; leave out an optional field instead`;
  return `must be ${noun}`;
}
