/**
 * docs/api.md#dr-retail: the published OpenAPI document states every rule of a DR Retail body
 * that JSON Schema can state, so that a client generated from it never sends a body the service
 * refuses for such a rule. A property check of docs/openapi.json against the API Worker itself:
 * bodies and headers drawn from the document's own schemas (test/support/json-schema-arbitrary.ts),
 * judged by Ajv as a client's validator would, sent to add. A body the document calls valid is
 * refused only by the mapping to our model (its minor units, its lines: rules on values JSON
 * Schema cannot state, listed in MAPPING_RULES); a body it calls invalid is refused.
 */
import { readFileSync } from "node:fs";
import path from "node:path";
import { Ajv2020 } from "ajv/dist/2020.js";
import addFormats from "ajv-formats";
import fc from "fast-check";
import type { Miniflare } from "miniflare";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { FULL_CARD_NUMBER } from "../../src/shared/card-numbers.ts";
import { PATHS } from "../../src/shared/paths.ts";
import { OPS_SCOPE, clientKey } from "../../src/shared/types.ts";
import { newClientRecord } from "../../src/shared/client-records.ts";
import { startApiWorker } from "../support/api-miniflare.ts";
import { breakages, valueOf, type Schema } from "../support/json-schema-arbitrary.ts";
import { ROOT, freshState } from "../support/run-script.ts";

interface Parameter {
  name: string;
  in: string;
  required: boolean;
  schema: Schema;
}
const document = JSON.parse(readFileSync(path.join(ROOT, "docs/openapi.json"), "utf8")) as {
  paths: Record<
    string,
    {
      post: { parameters: Parameter[]; requestBody: { content: Record<string, { schema: Schema; example: unknown }> } };
      get: { responses: Record<string, { content?: Record<string, { schema: Schema }> }> };
    }
  >;
  components: { schemas: Record<string, Schema> };
};
const components = document.components.schemas;
const add = document.paths[PATHS.add]!.post;
const DR_MEDIA_TYPES = Object.keys(add.requestBody.content).filter((type) => type.includes("profile="));
const V11 = DR_MEDIA_TYPES.find((type) => type.endsWith("/v1.1"))!;

// What the mapping to our model refuses (src/api/dr-retail-mapping.ts), the rules on values the
// document states in words: an amount's decimals against its currency, the lines and totals of
// our model; and a full card number in a card-number field (a Luhn check).
const MAPPING_RULES = [
  "the minor unit of its currency",
  "is not a JSON number",
  "replace has no amount of its own to map",
  "our model needs at least one line",
  "minor units (DR Retail",
  "our model holds at most",
  "of our receipt model, which",
  "a line of our model has a quantity",
  FULL_CARD_NUMBER,
];

const ajv = new Ajv2020({ strict: false, allErrors: false });
addFormats.default(ajv);
for (const [name, schema] of Object.entries(components)) ajv.addSchema(schema, `#/components/schemas/${name}`);
const validatorOf = (mediaType: string) => ajv.compile(add.requestBody.content[mediaType]!.schema);

const state = freshState();
let mf: Miniflare;
let baseUrl = "";
let token = "";
const CLIENT = "pos-openapi-check";
const SHOPPER = { app_user_id: "au-openapi-check" };

/** Sends a body to add with headers drawn from the document's own header schemas. */
async function send(mediaType: string, body: unknown, headers: Record<string, string>): Promise<{ status: number; message: string }> {
  const response = await mf.dispatchFetch(`${baseUrl}${PATHS.add}`, {
    method: "POST",
    headers: { Authorization: `Bearer ${token}`, client_id: CLIENT, chain_id: "c1", "Content-Type": mediaType, ...headers },
    body: JSON.stringify(body),
  });
  const answer = (await response.json()) as { message?: string };
  return { status: response.status, message: answer.message ?? "" };
}

/**
 * app_user_id and Idempotency-Key as the document's header parameters allow them; a key is made
 * unique, as a till makes one per receipt (a key used again for another body is a 409 of its own).
 */
const headersArbitrary = fc
  .record(
    Object.fromEntries(
      add.parameters.filter((parameter) => parameter.in === "header" && ["app_user_id", "Idempotency-Key"].includes(parameter.name)).map((parameter) => [parameter.name, valueOf(parameter.schema, components)]),
    ) as Record<string, fc.Arbitrary<string>>,
  )
  .map((headers) => ({ ...headers, "Idempotency-Key": `${crypto.randomUUID()}${headers["Idempotency-Key"]}`.slice(0, 255) }));

/** Whether the service's answer to a body the document calls valid keeps the document's word. */
function acceptedOrMappingRule({ status, message }: { status: number; message: string }): boolean {
  return status === 200 || (status === 406 && MAPPING_RULES.some((rule) => message.includes(rule)));
}

beforeAll(async () => {
  mf = startApiWorker(state);
  baseUrl = (await mf.ready).origin;
  const { record, secret } = await newClientRecord({ client_id: CLIENT, chains: ["c1"] });
  await (await mf.getKVNamespace("CLIENTS")).put(clientKey(CLIENT), JSON.stringify(record));
  const login = await mf.dispatchFetch(`${baseUrl}${PATHS.login}`, {
    method: "POST",
    headers: { client_id: CLIENT, client_secret: secret, token_type: "Bearer", scope: "service.pos" },
  });
  token = ((await login.json()) as { data: { access_token: string } }).data.access_token;
}, 180_000);
afterAll(() => mf?.dispose());

describe("docs/api.md#dr-retail the document's own DR Retail v1.1 example, changed as a client could", () => {
  const example = add.requestBody.content[V11]!.example as { business_unit: { contact: { website?: string; address: Record<string, unknown> } }; customer?: unknown };
  const changed = (change: (body: typeof example) => void) => {
    const body = structuredClone(example);
    change(body);
    return body;
  };
  const loyaltyDate = (date: string) =>
    changed((body) => {
      body.customer = { id: { loyalty: { program: "Club", customer_number: "0042", effective_date: date } } };
    });

  it("the example as published: the document calls it valid and the service stores it", async () => {
    expect(validatorOf(V11)(example)).toBe(true);
    expect(await send(V11, example, SHOPPER)).toMatchObject({ status: 200 });
    expect(await send(V11, loyaltyDate("2026-01-01"), SHOPPER)).toMatchObject({ status: 200 });
  });

  it.each([
    ["website \"x\", not a URI", changed((body) => void (body.business_unit.contact.website = "x")), "/business_unit/contact/website"],
    ["street_address removed, and no post_box", changed((body) => void delete body.business_unit.contact.address.street_address), "/business_unit/contact/address/street_address"],
    ["a loyalty effective_date \"x\", not a date", loyaltyDate("x"), "/customer/id/loyalty/effective_date"],
  ])("%s: the document calls it invalid, and the service refuses it naming the field", async (_label, body, pointer) => {
    expect(validatorOf(V11)(body)).toBe(false);
    const answer = await send(V11, body, SHOPPER);
    expect(answer.status).toBe(406);
    expect(answer.message).toContain(`Body field ${pointer} `);
  });
});

describe("docs/api.md#dr-retail a property check of docs/openapi.json against the service", () => {
  // FUZZ_RUNS runs more draws, as for the fuzz campaigns; FUZZ_SEED replays a failing run.
  const runs = Number(process.env.FUZZ_RUNS ?? 60);
  const seed = process.env.FUZZ_SEED === undefined ? undefined : Number(process.env.FUZZ_SEED);

  it.each(DR_MEDIA_TYPES)("%s: a body the document calls valid is never refused for a rule the document states", async (mediaType) => {
    const valid = validatorOf(mediaType);
    const bodies = valueOf(add.requestBody.content[mediaType]!.schema, components).filter((body) => valid(body));
    let stored = 0;
    await fc.assert(
      fc.asyncProperty(bodies, headersArbitrary, async (body, headers) => {
        const answer = await send(mediaType, body, headers);
        if (answer.status === 200) stored += 1;
        expect(acceptedOrMappingRule(answer), `${answer.status} ${answer.message}`).toBe(true);
      }),
      { numRuns: runs, seed },
    );
    // Not every draw maps to our model, but the check must reach the store, not stop at the mapping.
    expect(stored).toBeGreaterThan(0);
  }, 600_000);

  it.each(DR_MEDIA_TYPES)("%s: a body the document calls invalid, broken in one place, is refused", async (mediaType) => {
    const schema = add.requestBody.content[mediaType]!.schema;
    const valid = validatorOf(mediaType);
    const broken = valueOf(schema, components)
      .filter((body) => valid(body))
      .chain((body) => {
        const invalid = breakages(body, schema, components).filter((breakage) => !valid(breakage.body));
        return invalid.length === 0 ? fc.constant(undefined) : fc.constantFrom(...invalid);
      })
      .filter((breakage) => breakage !== undefined);
    await fc.assert(
      fc.asyncProperty(broken, headersArbitrary, async (breakage, headers) => {
        const answer = await send(mediaType, breakage.body, headers);
        expect(answer.status, `${breakage.pointer} ${breakage.what}: ${answer.status} ${answer.message}`).toBe(406);
      }),
      { numRuns: runs, seed },
    );
  }, 600_000);
});

describe("docs/api.md#status the document lists every status the status answers", () => {
  it("an unhealthy service answers 503, which the document lists with a schema the answer keeps", async () => {
    const { record, secret } = await newClientRecord({ client_id: "ops-openapi-check", chains: [], scopes: [OPS_SCOPE] });
    await (await mf.getKVNamespace("CLIENTS")).put(clientKey(record.client_id), JSON.stringify(record));
    // One failed notice passes the threshold of wrangler.toml (1).
    await (await mf.getD1Database("DB_S1"))
      .prepare("INSERT INTO failed_notices (event_id, receipt_id, payload, created_at, failed_at, attempts, last_error) VALUES (?1, 'r-1', '{}', ?2, ?2, 11, 'HTTP 410')")
      .bind("019aa8a4-3c1e-7d2b-9f41-6c0e5b2d8a99", new Date().toISOString())
      .run();
    const login = await mf.dispatchFetch(`${baseUrl}${PATHS.login}`, {
      method: "POST",
      headers: { client_id: record.client_id, client_secret: secret, token_type: "Bearer", scope: OPS_SCOPE },
    });
    const opsToken = ((await login.json()) as { data: { access_token: string } }).data.access_token;
    const response = await mf.dispatchFetch(`${baseUrl}${PATHS.status}`, { headers: { Authorization: `Bearer ${opsToken}`, client_id: record.client_id } });
    const body = await response.json();
    expect(response.status).toBe(503);
    const documented = document.paths[PATHS.status]!.get.responses["503"]?.content?.["application/json"]?.schema;
    expect(documented, "the document lists the status's 503").toBeDefined();
    const keeps = ajv.compile(documented!);
    expect(keeps(body), JSON.stringify(keeps.errors)).toBe(true);
  });
});
