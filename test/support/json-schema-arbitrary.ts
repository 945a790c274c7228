/**
 * Values drawn from a JSON Schema of the OpenAPI document, as fast-check arbitraries, and ways to
 * break them: the document's own schemas are what a client generator reads, so what they call
 * valid or invalid is what the property check of test/docs/openapi-against-service.test.ts sends.
 * It covers the keywords the document uses (types, properties, required, additionalProperties,
 * enum, const, pattern, format, bounds, items, anyOf and oneOf of members, $ref); whether a value
 * is valid is decided by Ajv afterwards, never by this file, so a draw that misses is filtered
 * out, not sent under a false label.
 */
import fc from "fast-check";

/** A schema of the document: JSON Schema 2020-12 as zod writes it. */
export type Schema = { [keyword: string]: unknown };
type Schemas = Record<string, Schema>;

// Few and short: a body stays far below add's 64 KiB and its 64 levels.
const MAX_ITEMS = 2;
// Below this depth an object gets only its required members.
const MAX_DEPTH = 6;

// One arbitrary per component and depth: the DR bodies refer to their parts from many places.
const byComponent = new WeakMap<Schemas, Map<string, fc.Arbitrary<unknown>>>();

/** An arbitrary of values of `schema`, with `$ref`s resolved in `components`. */
export function valueOf(schema: Schema, components: Schemas, depth = 0): fc.Arbitrary<unknown> {
  if (typeof schema.$ref === "string") {
    const cache = byComponent.get(components) ?? new Map<string, fc.Arbitrary<unknown>>();
    byComponent.set(components, cache);
    const key = `${schema.$ref} ${Math.min(depth, MAX_DEPTH)}`;
    if (!cache.has(key)) cache.set(key, valueOf(resolve(schema.$ref, components), components, depth));
    return cache.get(key)!;
  }
  if ("const" in schema) return fc.constant(schema.const);
  if (Array.isArray(schema.enum)) return fc.constantFrom(...(schema.enum as unknown[]));
  if (Array.isArray(schema.oneOf) && schema.type === undefined) return fc.oneof(...(schema.oneOf as Schema[]).map((branch) => valueOf(branch, components, depth)));
  if (Array.isArray(schema.anyOf) && schema.type === undefined) return fc.oneof(...(schema.anyOf as Schema[]).map((branch) => valueOf(branch, components, depth)));
  switch (schema.type) {
    case "object":
      return objectOf(schema, components, depth);
    case "array":
      return fc.array(valueOf((schema.items as Schema | undefined) ?? {}, components, depth + 1), {
        minLength: (schema.minItems as number | undefined) ?? 0,
        maxLength: Math.min((schema.maxItems as number | undefined) ?? MAX_ITEMS, MAX_ITEMS),
      });
    case "string":
      return stringOf(schema);
    case "integer":
      return fc.integer({ min: Math.max((schema.minimum as number | undefined) ?? -1_000_000, -1_000_000), max: Math.min((schema.maximum as number | undefined) ?? 1_000_000, 1_000_000) });
    case "number":
      // Whole and two-decimal amounts, as a till writes them.
      return fc.integer({ min: schema.minimum === 0 ? 0 : -100_000, max: 100_000 }).map((cents) => cents / 100);
    case "boolean":
      return fc.boolean();
    default:
      return fc.oneof(fc.string({ maxLength: 8 }), fc.integer(), fc.boolean());
  }
}

/**
 * An object with its required members, some of its optional ones, and, where the schema has an
 * anyOf or oneOf of members, one branch chosen and its members given (a oneOf's other branches'
 * required members left out, as exactly one must hold).
 */
function objectOf(schema: Schema, components: Schemas, depth: number): fc.Arbitrary<unknown> {
  const choices = (schema.oneOf ?? schema.anyOf) as Schema[] | undefined;
  if (!choices) return membersOf(schema, components, depth, []);
  return fc.oneof(
    ...choices.map((choice) => {
      const branch = typeof choice.$ref === "string" ? resolve(choice.$ref, components) : choice;
      const merged: Schema = {
        ...schema,
        properties: { ...(schema.properties as Schemas | undefined), ...(branch.properties as Schemas | undefined) },
        required: [...((schema.required as string[] | undefined) ?? []), ...((branch.required as string[] | undefined) ?? [])],
      };
      // A branch of exactly one member (customer.id's four ways) takes none of the optional ones.
      const only = branch.maxProperties === 1 ? (branch.required as string[]) : undefined;
      const others = schema.oneOf ? choices.filter((other) => other !== choice).flatMap((other) => (other.required as string[] | undefined) ?? []) : [];
      return membersOf(only ? { ...merged, properties: pick(merged.properties as Schemas, only), required: only } : merged, components, depth, others);
    }),
  );
}

function membersOf(schema: Schema, components: Schemas, depth: number, leaveOut: readonly string[]): fc.Arbitrary<unknown> {
  const properties = (schema.properties ?? {}) as Schemas;
  const required = new Set((schema.required as string[] | undefined) ?? []);
  const optional = Object.keys(properties).filter((name) => !required.has(name) && !leaveOut.includes(name));
  const record = Object.fromEntries([...required, ...(depth < MAX_DEPTH ? optional : [])].map((name) => [name, valueOf(properties[name] ?? {}, components, depth + 1)]));
  return fc.record(record, { requiredKeys: [...required] });
}

function stringOf(schema: Schema): fc.Arbitrary<string> {
  switch (schema.format) {
    case "date-time":
      return fc.date({ min: new Date("2000-01-01T00:00:00Z"), max: new Date("2099-12-31T23:59:59Z"), noInvalidDate: true }).map((date) => date.toISOString());
    case "date":
      return fc.date({ min: new Date("2000-01-01T00:00:00Z"), max: new Date("2099-12-31T00:00:00Z"), noInvalidDate: true }).map((date) => date.toISOString().slice(0, 10));
    case "email":
      return fc.emailAddress();
    case "uri":
      return fc.webUrl();
  }
  if (typeof schema.pattern === "string") {
    const matching = fc.stringMatching(new RegExp(schema.pattern));
    const max = schema.maxLength as number | undefined;
    return max === undefined ? matching : matching.filter((text) => [...text].length <= max);
  }
  // Letters and spaces: free text that no later rule of the service reads as something else.
  const min = (schema.minLength as number | undefined) ?? 0;
  return fc.stringMatching(/^[a-z ]*$/).map((text) => text.slice(0, Math.min((schema.maxLength as number | undefined) ?? 24, 24))).filter((text) => text.length >= min);
}

function pick(properties: Schemas, names: readonly string[]): Schemas {
  return Object.fromEntries(names.map((name) => [name, properties[name] ?? {}]));
}

/** The component a `#/components/schemas/<name>` reference names. */
export function resolve(ref: string, components: Schemas): Schema {
  const name = ref.replace("#/components/schemas/", "");
  const schema = components[name];
  if (!schema) throw new Error(`no component ${name}`);
  return schema;
}

/** One way to break a body at one place, described for the failure message. */
export interface Breakage {
  /** The JSON pointer of the member broken (or of its object, for one removed or added). */
  pointer: string;
  what: string;
  body: unknown;
}

/**
 * Every single-place breakage of `value` that its schema states: a required member removed, every
 * member of an anyOf or oneOf of members removed, a value of the wrong type, outside its enum,
 * not of its format or pattern, a member a closed object does not allow. Ajv still judges each
 * one: a breakage that another branch of a oneOf accepts is not counted as invalid.
 */
export function breakages(value: unknown, schema: Schema, components: Schemas, pointer = ""): Breakage[] {
  if (typeof schema.$ref === "string") return breakages(value, resolve(schema.$ref, components), components, pointer);
  const found: Breakage[] = [];
  const here = (what: string, broken: unknown) => found.push({ pointer, what, body: broken });
  if (Array.isArray(schema.oneOf) && schema.type === undefined) {
    for (const branch of schema.oneOf as Schema[]) found.push(...breakages(value, branch, components, pointer));
    return found;
  }
  if (schema.type === "object" && value !== null && typeof value === "object" && !Array.isArray(value)) {
    const object = value as Record<string, unknown>;
    for (const name of (schema.required as string[] | undefined) ?? []) {
      if (name in object) here(`without its required member ${name}`, withoutMember(object, name));
    }
    for (const choice of (schema.anyOf ?? schema.oneOf ?? []) as Schema[]) {
      const names = (choice.required as string[] | undefined) ?? [];
      if (names.length > 0 && !choice.maxProperties && names.every((name) => name in object)) {
        const all = ((schema.anyOf ?? schema.oneOf) as Schema[]).flatMap((each) => (each.required as string[] | undefined) ?? []);
        here(`without any of ${all.join(", ")}`, Object.fromEntries(Object.entries(object).filter(([name]) => !all.includes(name))));
      }
    }
    if (schema.additionalProperties === false) here("with a member its object does not allow", { ...object, not_a_member: "x" });
    for (const [name, member] of Object.entries((schema.properties ?? {}) as Schemas)) {
      if (!(name in object)) continue;
      for (const inner of breakages(object[name], member, components, `${pointer}/${name}`)) {
        found.push({ ...inner, body: { ...object, [name]: inner.body } });
      }
    }
    return found;
  }
  if (schema.type === "array" && Array.isArray(value)) {
    value.forEach((item, index) => {
      for (const inner of breakages(item, (schema.items as Schema | undefined) ?? {}, components, `${pointer}/${index}`)) {
        found.push({ ...inner, body: value.map((each, at) => (at === index ? inner.body : each)) });
      }
    });
    return found;
  }
  if (typeof schema.format === "string") here(`"x", not of format ${schema.format}`, "x");
  if (typeof schema.pattern === "string" && !new RegExp(schema.pattern).test("\u0001")) here(`"\\u0001", not of its pattern`, "\u0001");
  if (Array.isArray(schema.enum)) here("a value outside its enum", "not-in-the-enum");
  if (schema.type === "string") here("a number where a string belongs", 7);
  if (schema.type === "number" || schema.type === "integer") here("a string where a number belongs", "7");
  if (schema.type === "boolean") here("a string where a boolean belongs", "true");
  return found;
}

function withoutMember(object: Record<string, unknown>, name: string): Record<string, unknown> {
  const { [name]: _removed, ...rest } = object;
  return rest;
}
