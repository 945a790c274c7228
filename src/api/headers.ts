import type * as z from "zod/mini";
import { ApiError } from "./errors.ts";

/**
 * Reads the headers a schema names from a request, case-insensitively, and validates them.
 * Every absent required header is named in one 400; then every unusable value in one 406
 * (contract §1), so a client fixes all of them in one round.
 */
export function readHeaders<Shape extends Record<string, z.ZodMiniType>>(
  request: Request,
  schema: z.ZodMiniObject<Shape>,
): z.output<z.ZodMiniObject<Shape>> {
  const present: Record<string, string> = {};
  const missing: string[] = [];
  for (const [name, field] of Object.entries(schema.shape)) {
    const value = request.headers.get(name);
    if (value !== null) present[name] = value;
    else if (!field.safeParse(undefined).success) missing.push(name);
  }
  if (missing.length > 0) {
    throw new ApiError(400, `${listNames("Header", missing)} missing; there is no default.`);
  }
  const result = schema.safeParse(present);
  if (result.success) return result.data;
  const reasons = new Map<string, string>();
  for (const issue of result.error.issues) {
    const name = String(issue.path[0]);
    if (!reasons.has(name)) reasons.set(name, `Header ${name} ${issue.message}`);
  }
  throw new ApiError(406, `${[...reasons.values()].join("; ")}: not a usable string.`);
}

function listNames(noun: string, names: string[]): string {
  return names.length === 1 ? `${noun} ${names[0]} is` : `${noun}s ${names.join(", ")} are`;
}
