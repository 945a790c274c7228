import type * as z from "zod/mini";
import { missingHeaders, refuse, unusableHeaders } from "./refusals.ts";

/**
 * Reads the headers a schema names from a request, case-insensitively, and validates them.
 * Every absent required header is named in one 400; then every unusable value in one 406
 * (docs/api.md#common-rules), so a client fixes all of them in one round; a header in
 * `malformedIs400` that is unusable is a 400 instead.
 */
export function readHeaders<Shape extends Record<string, z.ZodMiniType>>(
  request: Request,
  schema: z.ZodMiniObject<Shape>,
  { malformedIs400 = [] }: { malformedIs400?: readonly (keyof Shape & string)[] } = {},
): z.output<z.ZodMiniObject<Shape>> {
  const present: Record<string, string> = {};
  const missing: string[] = [];
  for (const [name, field] of Object.entries(schema.shape)) {
    const value = request.headers.get(name);
    if (value !== null) present[name] = value;
    else if (!field.safeParse(undefined).success) missing.push(name);
  }
  if (missing.length > 0) {
    throw refuse(missingHeaders(missing));
  }
  const result = schema.safeParse(present);
  if (result.success) return result.data;
  const reasons = new Map<string, string>();
  for (const issue of result.error.issues) {
    const name = String(issue.path[0]);
    if (!reasons.has(name)) reasons.set(name, `Header ${name} ${issue.message}`);
  }
  // A route whose documents call a malformed value of these headers a bad request (docs/api.md#jobs).
  const bad = [...reasons].filter(([name]) => (malformedIs400 as readonly string[]).includes(name));
  if (bad.length > 0) throw refuse({ ...unusableHeaders(bad.map(([, reason]) => reason)), status: 400 });
  throw refuse(unusableHeaders([...reasons.values()]));
}
