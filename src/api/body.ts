/**
 * Reading a JSON request body (docs/api.md#add): its media type (415), its size (413) and the time it
 * takes to arrive (400), then JSON and the schema (406 naming every field at fault by its path,
 * such as `line_items[3].quantity`).
 */
import type * as z from "zod/mini";
import { ApiError } from "./errors.ts";
import { REFUSALS, bodyTooLarge, refuse } from "./refusals.ts";

/** docs/api.md#add: a body holds at most 64 KiB. */
export const MAX_BODY_BYTES = 64 * 1024;

/**
 * How long a body may take to arrive in full. A Worker has no wall-clock limit while its client
 * stays connected, so without this a body that trickles in, or never ends, would hold the request
 * open for as long as the sender likes. A till on a poor mobile link sends 64 KiB in a few seconds.
 */
export const BODY_DEADLINE_MS = 10_000;

/**
 * Reads the body of a request whose Content-Type header is `contentType`, which must be one JSON
 * object, and checks it against `schema`. Returns the checked value and the text exactly as sent,
 * for storing as given.
 */
export async function readJsonBody<Schema extends z.ZodMiniType>(
  request: Request,
  contentType: string,
  schema: Schema,
): Promise<{ value: z.output<Schema>; text: string }> {
  if (!isJsonMediaType(contentType)) {
    throw refuse(REFUSALS.mediaType, "content type");
  }
  const text = decodeUtf8(await readAtMost(request, MAX_BODY_BYTES));
  if (text.trim() === "") {
    throw refuse(REFUSALS.emptyBody, "empty body");
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw refuse(REFUSALS.notJson, "JSON syntax");
  }
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) {
    throw refuse(REFUSALS.notObject, "not an object");
  }
  const result = schema.safeParse(parsed, { error: plainMessage });
  if (!result.success) throw bodyRefusal(result.error.issues, fieldNamesOf(schema));
  return { value: result.data, text };
}

// A message names at most this many fields: a body of 500 broken lines must not echo 500 reasons.
const MAX_NAMED_FIELDS = 10;

// application/json takes no parameters (RFC 8259), yet clients add charset; only UTF-8 is JSON.
function isJsonMediaType(value: string): boolean {
  const [type = "", ...parameters] = value.split(";");
  if (type.trim().toLowerCase() !== "application/json") return false;
  return parameters.every((parameter) => {
    const [name = "", charset = ""] = parameter.split("=");
    return name.trim().toLowerCase() !== "charset" || /^"?utf-?8"?$/i.test(charset.trim());
  });
}

// Counts the bytes as they arrive, so that a Content-Length that lies, or none at all (chunked),
// cannot make the Worker hold more than the limit; and gives up at the deadline, so that a body
// that never ends cannot hold the Worker either.
async function readAtMost(request: Request, maxBytes: number): Promise<Uint8Array> {
  if (Number(request.headers.get("content-length")) > maxBytes) throw tooLarge("declared length");
  if (!request.body) return new Uint8Array();
  const reader = request.body.getReader();
  let timer: ReturnType<typeof setTimeout> | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(tooSlow()), BODY_DEADLINE_MS);
  });
  const chunks: Uint8Array[] = [];
  let size = 0;
  try {
    for (;;) {
      const { done, value } = await Promise.race([reader.read(), deadline]);
      if (done) break;
      size += value.byteLength;
      if (size > maxBytes) throw tooLarge("streamed length");
      chunks.push(value);
    }
  } catch (error) {
    await reader.cancel().catch(() => undefined);
    throw error;
  } finally {
    clearTimeout(timer);
  }
  const bytes = new Uint8Array(size);
  let offset = 0;
  for (const chunk of chunks) {
    bytes.set(chunk, offset);
    offset += chunk.byteLength;
  }
  return bytes;
}

function tooLarge(cause: string): ApiError {
  return refuse(bodyTooLarge(MAX_BODY_BYTES), cause);
}

// 400, not 408: docs/api.md#common-rules fixes the statuses, and among them an incomplete request is a
// malformed one (docs/api.md "Limits and hardening").
function tooSlow(): ApiError {
  return new ApiError(
    400,
    `Body did not arrive in full within ${BODY_DEADLINE_MS / 1000} s; send the whole body at once.`,
    { cause: "body deadline" },
  );
}

function decodeUtf8(bytes: Uint8Array): string {
  try {
    return new TextDecoder("utf-8", { fatal: true, ignoreBOM: false }).decode(bytes);
  } catch {
    throw refuse(REFUSALS.notUtf8, "UTF-8");
  }
}

function bodyRefusal(issues: readonly z.core.$ZodIssue[], schemaNames: ReadonlySet<string>): ApiError {
  // One reason per field, the first found: a field that is missing need not also be "not a string".
  const reasons = new Map<string, string>();
  const logged = new Set<string>();
  for (const issue of issues) {
    if (issue.code === "unrecognized_keys") {
      for (const key of issue.keys) {
        reasons.set(formatFieldPath([...issue.path, key]), "is not a field of this operation (check its spelling)");
        logged.add(`${formatFieldPath([...issue.path, key], schemaNames)} ${issue.code}`);
      }
    } else {
      const path = formatFieldPath(issue.path);
      if (!reasons.has(path)) reasons.set(path, issue.message);
      logged.add(`${formatFieldPath(issue.path, schemaNames)} ${issue.code}`);
    }
  }
  const named = [...reasons].slice(0, MAX_NAMED_FIELDS).map(([path, reason]) => `Body field ${path} ${reason}`);
  const more = reasons.size - named.length;
  const tail = more > 0 ? `; and ${more} more field${more === 1 ? "" : "s"}` : "";
  // The client's message may echo what the client sent (an unknown field's name, a metadata key,
  // a sum of its amounts); the log keeps to the schema's own names and the rule broken, because
  // receipt content never goes to the log.
  const cause = `body rules: ${[...logged].slice(0, MAX_NAMED_FIELDS).join(", ")}${logged.size > MAX_NAMED_FIELDS ? ", …" : ""}`;
  return new ApiError(406, `${named.join("; ")}${tail}.`, { cause });
}

// Writes a field's path as a JavaScript reader would: `line_items[3].quantity`, or
// `metadata["till no"]` for a key that is not a plain name. With `onlyNames`, any other name is
// written `[*]`: it came from the client.
function formatFieldPath(path: readonly PropertyKey[], onlyNames?: ReadonlySet<string>): string {
  let text = "";
  for (const part of path) {
    if (typeof part === "number") text += `[${part}]`;
    else if (onlyNames && !onlyNames.has(String(part))) text += "[*]";
    else if (typeof part === "string" && PLAIN_NAME.test(part)) text += text === "" ? part : `.${part}`;
    else text += `[${JSON.stringify(shorten(String(part)))}]`;
  }
  return text;
}

const namesBySchema = new WeakMap<z.ZodMiniType, ReadonlySet<string>>();

// The field names a schema defines, at any depth.
function fieldNamesOf(schema: z.ZodMiniType): ReadonlySet<string> {
  let names = namesBySchema.get(schema);
  if (!names) {
    const found = new Set<string>();
    collectFieldNames(schema, found);
    names = found;
    namesBySchema.set(schema, names);
  }
  return names;
}

function collectFieldNames(schema: z.core.$ZodType, names: Set<string>): void {
  const def = schema._zod.def as {
    shape?: Record<string, z.core.$ZodType>;
    element?: z.core.$ZodType;
    innerType?: z.core.$ZodType;
    valueType?: z.core.$ZodType;
  };
  for (const [name, field] of Object.entries(def.shape ?? {})) {
    names.add(name);
    collectFieldNames(field, names);
  }
  for (const inner of [def.element, def.innerType, def.valueType]) if (inner) collectFieldNames(inner, names);
}

const PLAIN_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

const NOUNS: Record<string, string> = {
  string: "a string",
  number: "a number",
  array: "an array",
  object: "a JSON object",
  record: "a JSON object",
};

// Words the type errors, which schemas leave to the reader of the issues.
function plainMessage(issue: z.core.$ZodRawIssue): string | undefined {
  if (issue.code !== "invalid_type") return undefined;
  const noun = NOUNS[issue.expected] ?? issue.expected;
  if (issue.input === undefined) return "is missing";
  if (issue.input === null) return `must be ${noun}, not null; leave out an optional field instead`;
  return `must be ${noun}`;
}

function shorten(text: string): string {
  return text.length > 40 ? `${text.slice(0, 40)}…` : text;
}
