/**
 * Reading a JSON request body (docs/api.md#add): its media type and coding (415), its size (413)
 * and the time it takes to arrive (400), then JSON, I-JSON and its nesting, the schema (406
 * naming every field at fault by its path, such as `line_items[3].quantity`), and full card
 * numbers in free text, which are masked (docs/api.md#card-numbers).
 */
import type * as z from "zod/mini";
import { ApiError } from "./errors.ts";
import { FULL_CARD_NUMBER, findCardNumbersInText, maskCardNumbersInJson } from "../shared/card-numbers.ts";
import { plainMessage } from "../shared/issue-wording.ts";
import { MAX_NESTING, findIJsonFault, type IJsonFault } from "./i-json.ts";
import { REFUSALS, bodyTooLarge, mediaTypeParameterRepeated, mediaTypeParameterWithoutValue, refuse } from "./refusals.ts";

/** docs/api.md#add: a body holds at most 64 KiB. */
export const MAX_BODY_BYTES = 64 * 1024;

/** A body as read: its text as sent but its masked card numbers, and where they were. */
export interface ReadBody {
  /** The text as sent, byte for byte, but each string that held a full card number in free text, masked. */
  text: string;
  /** The JSON pointers (RFC 6901) of those strings, in the order of the text. */
  masked: string[];
}

/**
 * Reads the body of a request, which must be one JSON object in I-JSON, and checks it against
 * `schema`. Returns the text as sent, for storing as given, with every full card number in free
 * text masked: nothing stores, pushes, exports or archives one. Its Content-Type is the
 * caller's to read first, with `jsonMediaType`, which tells it the schema.
 *
 * `deadlineMs` (BODY_DEADLINE_SECONDS, 10 s deployed) is how long the body may take to arrive in
 * full. A Worker has no wall-clock limit while its client stays connected, so without it a body
 * that trickles in, or never ends, would hold the request open for as long as the sender likes. A
 * till on a poor mobile link sends 64 KiB in a few seconds.
 */
export async function readJsonBody(
  request: Request,
  schema: z.ZodMiniType,
  deadlineMs: number,
  refusal: BodyRefusal = fieldsRefusal,
): Promise<ReadBody> {
  // The runtime hands a Worker the body as sent, still compressed: a gzipped body would be
  // refused as not UTF-8, and a JSON body labelled br stored as if nobody might decode it again.
  if (!isIdentityCoding(request.headers.get("content-encoding"))) {
    throw refuse(REFUSALS.contentEncoding, "content encoding");
  }
  const text = decodeUtf8(await readAtMost(request, MAX_BODY_BYTES, deadlineMs));
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
  const fault = findIJsonFault(text);
  if (fault) throw notIJson(fault, fieldNamesOf(schema));
  exposeProtoMembers(parsed);
  const result = schema.safeParse(parsed, { error: plainMessage });
  if (!result.success) throw refusal(result.error.issues, fieldNamesOf(schema));
  const cards = findCardNumbersInText(parsed);
  if (cards.inName) throw refusal([cardNumberInName(cards.inName)], fieldNamesOf(schema));
  if (cards.values.length === 0) return { text, masked: [] };
  return { text: maskCardNumbersInJson(text), masked: cards.values.map((path) => jsonPointer(path)) };
}

// A member name holding a full card number, as the schema would report it: the object's path,
// never the value. A name is refused rather than masked: two names masked alike would be one.
function cardNumberInName(path: PropertyKey[]): z.core.$ZodIssue {
  return { code: "custom", path, message: `has a member whose name ${FULL_CARD_NUMBER}`, input: undefined };
}

/** The 406 for a body that breaks its schema's rules, from the issues found and the schema's field names. */
export type BodyRefusal = (issues: readonly z.core.$ZodIssue[], schemaNames: ReadonlySet<string>) => ApiError;

/**
 * The refusal of a body in a published format (docs/api.md#dr-retail): the first failing field
 * alone, by its JSON pointer (RFC 6901), and the rule of `format` it breaks.
 */
export function firstFieldRefusal(format: string): BodyRefusal {
  return (issues, schemaNames) => {
    const issue = issues[0]!;
    const path = issue.code === "unrecognized_keys" ? [...issue.path, issue.keys[0]!] : issue.path;
    const reason =
      issue.code === "unrecognized_keys"
        ? "is not a field of this version; check its spelling"
        : issue.code === "invalid_union" && "options" in issue && Array.isArray(issue.options)
          ? `must be one of: ${issue.options.join(", ")}`
          : issue.message;
    return pointerRefusal(path, reason, format, `${jsonPointer(path, schemaNames)} ${issue.code}`);
  };
}

/**
 * A 406 naming a field of a body in a published format by its JSON pointer, e.g.
 * `/totals/4/amount`, and the rule it breaks.
 */
export function drBodyRefusal(pointer: string, reason: string, format: string): ApiError {
  const path = pointer.split("/").slice(1);
  // The mapping names only the format's own fields and indexes: the log may keep the pointer.
  return pointerRefusal(path, reason, format, `${pointer} mapping`);
}

function pointerRefusal(path: readonly PropertyKey[], reason: string, format: string, logged: string): ApiError {
  const field = shorten(jsonPointer(path), MAX_PATH_CHARACTERS);
  return new ApiError(406, `Body field ${field === "" ? "(the body itself)" : field} ${reason} (${format}).`, {
    cause: `body rules: ${shorten(logged, MAX_PATH_CHARACTERS)}`,
  });
}

// RFC 6901: each name after a slash, with ~ and / escaped. With `onlyNames`, any other name is
// written `*`: it came from the client.
function jsonPointer(path: readonly PropertyKey[], onlyNames?: ReadonlySet<string>): string {
  return path
    .map((key) => {
      const part = key === PROTO_STAND_IN ? "__proto__" : String(key);
      if (onlyNames && typeof key !== "number" && !/^\d+$/.test(part) && !onlyNames.has(part)) return "/*";
      return `/${part.replaceAll("~", "~0").replaceAll("/", "~1")}`;
    })
    .join("");
}

// A message names at most this many fields: a body of 500 broken lines must not echo 500 reasons.
const MAX_NAMED_FIELDS = 10;

/**
 * The parameters of a Content-Type that must be JSON (docs/api.md#add-errors), by lower-case
 * name, unquoted: `profile` names a published format (docs/api.md#dr-retail). Throws 415 for
 * another media type, a charset other than UTF-8, a parameter sent twice or one without a value.
 * The one reader of Content-Type: a second one could take the first of two profiles where this
 * one takes the last.
 * @example jsonMediaType("application/json; profile=\"https://se.receipts.kivra.com/schemas/json/retail/v1.1\"").get("profile") // "https://se.receipts.kivra.com/schemas/json/retail/v1.1"
 */
export function jsonMediaType(contentType: string): ReadonlyMap<string, string> {
  const [type = "", ...parameters] = splitOutsideQuotes(contentType);
  // application/json defines no parameters (RFC 8259), yet clients add charset, and DR Retail's
  // changelog a profile.
  if (type.trim().toLowerCase() !== "application/json") throw refuse(REFUSALS.mediaType, "content type");
  const values = new Map<string, string>();
  for (const parameter of parameters) {
    // RFC 9110 §5.6.6 allows an empty parameter, as in `application/json;`.
    if (parameter.trim() === "") continue;
    const separator = parameter.indexOf("=");
    const name = (separator < 0 ? parameter : parameter.slice(0, separator)).trim().toLowerCase();
    // RFC 6838 §4.3: a parameter must not be given twice; which of two a reader takes differs.
    if (values.has(name)) throw refuse(mediaTypeParameterRepeated(name), "media type parameter repeated");
    const value = separator < 0 ? "" : unquote(parameter.slice(separator + 1).trim());
    if (value === "") throw refuse(mediaTypeParameterWithoutValue(name), "media type parameter without value");
    values.set(name, value);
  }
  const charset = values.get("charset");
  // Only UTF-8 is JSON.
  if (charset !== undefined && !/^utf-?8$/i.test(charset)) throw refuse(REFUSALS.mediaType, "charset");
  return values;
}

// Splits at each semicolon outside a quoted string (RFC 9110 §5.6.4), so that a quoted value
// holding one stays one value.
function splitOutsideQuotes(value: string): string[] {
  const parts = [""];
  let quoted = false;
  for (let at = 0; at < value.length; at++) {
    let character = value[at]!;
    if (character === ";" && !quoted) {
      parts.push("");
      continue;
    }
    if (character === '"') quoted = !quoted;
    // A quoted-pair such as \" stays as sent, for unquote to read.
    else if (character === "\\" && quoted) character += value[++at] ?? "";
    parts[parts.length - 1] += character;
  }
  return parts;
}

// A quoted string's content with its quoted-pairs read (RFC 9110 §5.6.4); a token as it is.
function unquote(value: string): string {
  return /^".*"$/s.test(value) ? value.slice(1, -1).replace(/\\(.)/gs, "$1") : value;
}

// A list of codings, applied in order (RFC 9110 §8.4); identity is no coding at all.
function isIdentityCoding(value: string | null): boolean {
  if (value === null) return true;
  return value.split(",").every((coding) => ["", "identity"].includes(coding.trim().toLowerCase()));
}

// Counts the bytes as they arrive, so that a Content-Length that lies, or none at all (chunked),
// cannot make the Worker hold more than the limit; and gives up at the deadline, so that a body
// that never ends cannot hold the Worker either.
async function readAtMost(request: Request, maxBytes: number, deadlineMs: number): Promise<Uint8Array> {
  if (Number(request.headers.get("content-length")) > maxBytes) throw tooLarge("declared length");
  if (!request.body) return new Uint8Array();
  const body = boundedReader(request.body, maxBytes + 1);
  let timer: ReturnType<typeof setTimeout> | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(tooSlow(deadlineMs)), deadlineMs);
  });
  try {
    for (let ended = false; !ended; ) {
      ended = await Promise.race([body.read(), deadline]);
      if (body.size > maxBytes) throw tooLarge("streamed length");
    }
  } catch (error) {
    await body.cancel();
    throw error;
  } finally {
    clearTimeout(timer);
  }
  return body.bytes();
}

/** A body read into one buffer of `capacity` bytes; `read` answers true at its end or when the buffer is full. */
interface BoundedReader {
  read(): Promise<boolean>;
  readonly size: number;
  bytes(): Uint8Array;
  cancel(): Promise<void>;
}

// A request's body from the runtime is a byte stream: read into one buffer, a 40 KB add takes 3
// reads where a default reader hands over 11 chunks of 4 KiB, each a turn of the event loop (8 %
// of the API Worker's thread in a profile of 40 KB adds, 3.6 % so). A body built from a plain
// stream has no BYOB reader: its chunks are copied into the buffer as they come.
function boundedReader(stream: ReadableStream<Uint8Array>, capacity: number): BoundedReader {
  let buffer = new ArrayBuffer(capacity);
  let size = 0;
  const byob = byobReaderOf(stream);
  const reader = byob ?? stream.getReader();
  // Adds what arrived to the buffer; answers whether the body has ended.
  const readMore = byob
    ? async () => {
        const { done, value } = await byob.read(new Uint8Array(buffer, size));
        // The read transfers the buffer: its bytes live on in the view it hands back.
        if (value) [buffer, size] = [value.buffer as ArrayBuffer, size + value.byteLength];
        return done;
      }
    : async () => {
        const { done, value } = await (reader as ReadableStreamDefaultReader<Uint8Array>).read();
        // Bytes past the buffer are only counted: the caller refuses such a body.
        if (value) new Uint8Array(buffer, size).set(value.subarray(0, capacity - size));
        size += value?.byteLength ?? 0;
        return done;
      };
  return {
    read: async () => (await readMore()) || size >= capacity,
    get size() {
      return size;
    },
    bytes: () => new Uint8Array(buffer, 0, size),
    cancel: () => reader.cancel().catch(() => undefined),
  };
}

function byobReaderOf(stream: ReadableStream<Uint8Array>): ReadableStreamBYOBReader | undefined {
  try {
    return stream.getReader({ mode: "byob" });
  } catch {
    return undefined;
  }
}

function tooLarge(cause: string): ApiError {
  return refuse(bodyTooLarge(MAX_BODY_BYTES), cause);
}

// 400, not 408: docs/api.md#common-rules fixes the statuses, and among them an incomplete request is a
// malformed one (docs/api.md "Limits and hardening").
function tooSlow(deadlineMs: number): ApiError {
  return new ApiError(
    400,
    `Body did not arrive in full within ${deadlineMs / 1000} s; send the whole body at once.`,
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

// A path as long as the nesting would make the message as long as the body; the start says where.
const MAX_PATH_CHARACTERS = 200;

const I_JSON_FAULTS: Record<Exclude<IJsonFault["rule"], "duplicate name" | "nesting">, string> = {
  NUL: "a NUL character",
  "lone surrogate": "a lone surrogate",
  noncharacter: "a Unicode noncharacter",
};

// The first fault alone, as for a syntax error: the scan stops there.
function notIJson({ path, rule, inName }: IJsonFault, schemaNames: ReadonlySet<string>): ApiError {
  const reason =
    rule === "nesting"
      ? `nests arrays and objects more than ${MAX_NESTING} deep; a body may hold at most ${MAX_NESTING} levels`
      : `${iJsonBreach(rule, inName)}; a body must be I-JSON (RFC 7493)`;
  const field = shorten(formatFieldPath(path), MAX_PATH_CHARACTERS);
  const logged = shorten(formatFieldPath(path, schemaNames), MAX_PATH_CHARACTERS);
  return new ApiError(406, `Body field ${field} ${reason}.`, {
    cause: `${rule === "nesting" ? "too deep" : "not I-JSON"}: ${logged} ${rule}`,
  });
}

function iJsonBreach(rule: Exclude<IJsonFault["rule"], "nesting">, inName: boolean): string {
  if (rule === "duplicate name") return "appears more than once in one object";
  return inName ? `has ${I_JSON_FAULTS[rule]} in its name` : `holds ${I_JSON_FAULTS[rule]}`;
}

// zod keeps a member named `__proto__` off the objects it builds, and so never checks it: every
// rule of a record would pass over that key unseen. Under this stand-in name, which no body can
// hold (a NUL in a name is not I-JSON), such a member is checked as any other and named back.
const PROTO_STAND_IN = "\u0000__proto__";

// JSON.parse makes `__proto__` an own member; renaming it leaves every object's prototype alone.
function exposeProtoMembers(body: object): void {
  const pending: unknown[] = [body];
  while (pending.length > 0) {
    const value = pending.pop();
    if (typeof value !== "object" || value === null) continue;
    const members = value as Record<string, unknown>;
    if (Object.hasOwn(members, "__proto__")) {
      members[PROTO_STAND_IN] = members["__proto__"];
      delete members["__proto__"];
    }
    for (const member of Object.values(members)) pending.push(member);
  }
}

function fieldsRefusal(issues: readonly z.core.$ZodIssue[], schemaNames: ReadonlySet<string>): ApiError {
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

/**
 * Writes a field's path as a JavaScript reader would: `line_items[3].quantity`, or
 * `metadata["till no"]` for a key that is not a plain name. With `onlyNames`, any other name is
 * written `[*]`: it came from the client.
 */
export function formatFieldPath(path: readonly PropertyKey[], onlyNames?: ReadonlySet<string>): string {
  let text = "";
  for (const key of path) {
    const part = key === PROTO_STAND_IN ? "__proto__" : key;
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
    options?: readonly z.core.$ZodType[];
  };
  for (const [name, field] of Object.entries(def.shape ?? {})) {
    names.add(name);
    collectFieldNames(field, names);
  }
  for (const inner of [def.element, def.innerType, def.valueType, ...(def.options ?? [])]) if (inner) collectFieldNames(inner, names);
}

const PLAIN_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

function shorten(text: string, maxLength = 40): string {
  return text.length > maxLength ? `${text.slice(0, maxLength)}…` : text;
}
