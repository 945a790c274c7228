/**
 * Generates the OpenAPI 3.1 document of receipts.v2 from the very zod schemas the Worker
 * validates with, through zod's own `z.toJSONSchema` (JSON Schema 2020-12, OpenAPI 3.1's dialect).
 * `npm run openapi` writes it to docs/openapi.json, which the Worker serves; the Worker never
 * runs this module.
 */
import * as z from "zod/mini";
import { PATHS } from "../../shared/paths.ts";
import { RATE_TIERS, ratePolicy, type LimitedRoute } from "../../shared/rate-limits.ts";
import { appUserErasedEvent, authorizationHeader, errorResponse, receiptCreatedEvent, receiptDeletedEvent } from "../../shared/schemas.ts";
import { ApiError, errorBody, internalErrorBody, type SupportPointer } from "../errors.ts";
import { allowedMethods, routeAt } from "../route-table.ts";
import { DOCUMENTED_OPERATIONS, DR_RETAIL_EXAMPLE, DR_RETAIL_EXAMPLE_MAPPED, type DocumentedOperation, type ErrorExample } from "./documented-operations.ts";

/** A JSON value, as the document is made of. */
type Json = string | number | boolean | null | Json[] | { [key: string]: Json };
type JsonObject = { [key: string]: Json };

/**
 * Error examples name the deployment's pointer the way docs/api.md does: the real values are
 * wrangler vars, and the committed document must not depend on one deployment.
 */
export const EXAMPLE_SUPPORT: SupportPointer = { docsUrl: "<DOCS_URL>", supportContact: "<SUPPORT_CONTACT>" };

/** The request reference of the 500 example, shaped like the cf-ray it is in production. */
export const EXAMPLE_REFERENCE = "8f3a1c2b9d4e5f60-FRA";

const JSON_MEDIA_TYPE = "application/json";
const BEARER_SCHEME = "bearerToken";

/** Builds the document. Throws when an operation's description and its schemas disagree. */
export function generateOpenApiDocument(): JsonObject {
  const schemas: JsonObject = { Error: jsonSchema(errorResponse, "output") };
  const paths: JsonObject = {};
  for (const [path, operation] of Object.entries(DOCUMENTED_OPERATIONS)) {
    schemas[operation.success.component] = jsonSchema(operation.success.schema, "output");
    for (const answer of operation.otherAnswers ?? []) schemas[answer.component] = jsonSchema(answer.schema, "output");
    if (operation.body) {
      schemas[operation.body.component] = jsonSchema(operation.body.schema, "input");
      Object.assign(schemas, alternativeSchemas(operation.body));
    }
    paths[openApiPath(path)] = { [routeAt(path).method.toLowerCase()]: documentedOperation(path, operation) };
  }
  paths[PATHS.openapi] = { get: openApiOperation() };
  paths[PATHS.docs] = { get: referenceOperation() };
  const webhooks: JsonObject = {};
  for (const [name, webhook] of Object.entries(WEBHOOKS)) {
    schemas[webhook.component] = jsonSchema(webhook.schema, "output");
    webhooks[name] = { post: webhookOperation(webhook) };
  }

  return {
    openapi: "3.1.1",
    info: {
      title: "receipts.v2",
      version: "2",
      description: DOCUMENT_DESCRIPTION,
      // The project grants no licence: a reader learns that here rather than guessing from a gap.
      license: { name: "Proprietary: no licence is granted", identifier: "LicenseRef-Proprietary" },
    },
    // The service serves this document with its own origin here instead (GET /receipts/v2/openapi.json).
    servers: [{ url: "http://127.0.0.1:8787", description: "Local development (npm start)" }],
    paths,
    webhooks,
    components: {
      schemas,
      securitySchemes: {
        [BEARER_SCHEME]: {
          type: "http",
          scheme: "bearer",
          bearerFormat: "JWT",
          description: `${describe(authorizationHeader)}; valid for 3600 seconds.`,
        },
      },
      responses: {
        NotFound: {
          description: "Any path this document does not list, such as another version or a trailing slash",
          content: errorContent({
            "unknown-path": {
              status: 404,
              summary: "The path is not an operation of receipts.v2",
              detail: "Path /receipts/v2/remove is not an operation of receipts.v2.",
            },
          }),
        },
      },
    },
  };
}

/** The document as committed in docs/openapi.json: two-space JSON with a final newline. */
export function serializeOpenApiDocument(): string {
  return `${JSON.stringify(generateOpenApiDocument(), null, 2)}\n`;
}

/** Renders an error row as the Worker answers it, with the placeholder support pointer. */
export function errorExampleBody(example: ErrorExample): z.infer<typeof errorResponse> {
  return example.status === 500
    ? internalErrorBody(EXAMPLE_REFERENCE, EXAMPLE_SUPPORT)
    : errorBody(new ApiError(example.status, example.detail, { statusWord: example.statusWord }), EXAMPLE_SUPPORT);
}

/** The rows every operation shares, added to its own: a wrong method and an internal failure. */
export function commonErrors(path: string, allow: string, method: string): Record<string, ErrorExample> {
  return {
    "wrong-method": {
      status: 405,
      summary: `Another method than ${method} on this path`,
      detail: `Method DELETE is not allowed on ${path}; use ${method}.`,
      headers: { allow },
    },
    internal: {
      status: 500,
      summary: "A failure of the service; the message carries a reference that the operator's log line carries too",
    },
  };
}

const DOCUMENT_DESCRIPTION = [
  "The edge service through which point-of-sale systems hand digital receipts to shoppers' phones.",
  "",
  "- Input travels in request headers, read case-insensitively; every response is `application/json; charset=utf-8`.",
  "- Every error body is `{message, status, status_code}` with `status_code` equal to the HTTP status. The message " +
    "names the header or field at fault and ends with `The request has invalid syntax. See <DOCS_URL> or contact " +
    "<SUPPORT_CONTACT>.`, the operator's documentation and support.",
  "- A missing header is a 400 naming every missing one; a present value that is empty, only white space, over " +
    "256 characters (Authorization excepted) or not printable ASCII is a 406 naming it.",
  "- A path not listed here answers 404 (`components.responses.NotFound`); another method on a listed path " +
    "answers 405 with `Allow`.",
  "- The service's test suite replays every error example of this document against the Worker.",
].join("\n");

function documentedOperation(path: string, operation: DocumentedOperation): JsonObject {
  const headers = jsonSchema(operation.headers, "input");
  const properties = headers.properties as Record<string, JsonObject>;
  const required = new Set(headers.required as string[]);
  const route = routeAt(path);
  const parameters: Json[] = [];
  let bodyRequired: boolean | undefined;
  for (const [name, schema] of Object.entries(properties)) {
    // OpenAPI 3.1 ignores header parameters named Authorization and Content-Type: the first is a
    // security scheme there, the second the request body's media type.
    if (name === "Authorization") continue;
    if (name === "Content-Type") bodyRequired = required.has(name);
    else parameters.push(parameter(name, "header", schema, required.has(name)));
  }
  for (const [name, { description, example }] of Object.entries(operation.pathParameters ?? {})) {
    parameters.push({ name, in: "path", required: true, description, schema: { type: "string" }, example });
  }
  const query = operation.query ? jsonSchema(operation.query, "input") : { properties: {} };
  for (const [name, schema] of Object.entries(query.properties as Record<string, JsonObject>)) {
    parameters.push(parameter(name, "query", schema, false));
  }
  if ((bodyRequired === undefined) !== (operation.body === undefined)) {
    throw new Error(`${path}: a JSON body and a Content-Type header go together`);
  }

  const result: JsonObject = {
    operationId: operation.operationId,
    summary: operation.summary,
    description: operation.description,
    // The route table's scope: a route that takes a token takes it always.
    security: route.scope ? [{ [BEARER_SCHEME]: [] }] : [],
    parameters,
  };
  if (operation.body) {
    result.requestBody = {
      required: bodyRequired ?? true,
      description: operation.body.description,
      content: {
        [JSON_MEDIA_TYPE]: { schema: componentRef(operation.body.component), example: operation.body.example as Json },
        ...Object.fromEntries(
          (operation.body.alternatives ?? []).map((body) => [body.mediaType, { schema: componentRef(body.component), example: body.example as Json }]),
        ),
      },
    };
  }
  const { success } = operation;
  const example = examplePath(path, operation);
  result.responses = {
    [success.status ?? 200]: {
      description: success.description,
      content: {
        [success.mediaType ?? JSON_MEDIA_TYPE]: { schema: componentRef(success.component), example: success.example as Json },
      },
    },
    ...Object.fromEntries(
      (operation.otherAnswers ?? []).map((answer) => [
        answer.status,
        { description: answer.description, content: { [JSON_MEDIA_TYPE]: { schema: componentRef(answer.component), example: answer.example as Json } } },
      ]),
    ),
    ...errorResponses({ ...operation.errors, ...commonErrors(example, allowedMethods(route), route.method) }),
  };
  if (route.limit) {
    for (const [status, response] of Object.entries(result.responses as Record<string, JsonObject>)) {
      response.headers = { ...(response.headers as JsonObject | undefined), ...rateLimitHeaders(route.limit, Number(status)) };
    }
  }
  return result;
}

/** A path as OpenAPI writes it: `{name}` for the router's `:name`. */
export function openApiPath(path: string): string {
  return path.replace(/:(\w+)/g, "{$1}");
}

/** A path with each parameter's example in its place: what an example's message names. */
export function examplePath(path: string, operation: Pick<DocumentedOperation, "pathParameters">): string {
  return path.replace(/:(\w+)/g, (_, name: string) => operation.pathParameters?.[name]?.example ?? name);
}

function openApiOperation(): JsonObject {
  return {
    operationId: "openapi",
    summary: "This document",
    description: "The OpenAPI 3.1 document of receipts.v2, public and cacheable for 5 minutes. HEAD answers as GET does.",
    security: [],
    responses: {
      200: {
        description: "OK: this document",
        content: { [JSON_MEDIA_TYPE]: { schema: { type: "object" } } },
      },
      ...errorResponses(commonErrors(PATHS.openapi, "GET, HEAD", "GET")),
    },
  };
}

function referenceOperation(): JsonObject {
  return {
    operationId: "reference",
    summary: "This reference, for a person",
    description:
      "An interactive page built from this document: every operation, header, error, example and event, with " +
      "\"Try it out\" against the same origin. Everything it loads comes from the service itself. HEAD answers as GET does.",
    security: [],
    responses: {
      200: { description: "OK: the page", content: { "text/html": { schema: { type: "string" } } } },
      ...errorResponses(commonErrors(PATHS.docs, "GET, HEAD", "GET")),
    },
  };
}

function parameter(name: string, where: "header" | "query", schema: JsonObject, required: boolean): JsonObject {
  const { description, example, ...rest } = schema;
  const parameter: JsonObject = { name, in: where, required };
  if (description !== undefined) parameter.description = description;
  parameter.schema = rest;
  if (example !== undefined) parameter.example = example;
  return parameter;
}

// One response per status, with an example per row; Allow and Retry-After come from the rows.
function errorResponses(rows: Record<string, ErrorExample>): JsonObject {
  const byStatus = new Map<number, Record<string, ErrorExample>>();
  for (const [name, row] of Object.entries(rows)) {
    byStatus.set(row.status, { ...byStatus.get(row.status), [name]: row });
  }
  const responses: JsonObject = {};
  for (const [status, examples] of [...byStatus].sort(([a], [b]) => a - b)) {
    const words = new Set(Object.values(examples).map((row) => errorExampleBody(row).status));
    const response: JsonObject = {
      description: `${[...words].join(" / ")}: ${Object.values(examples).map((row) => row.summary).join("; ")}`,
    };
    const headers = responseHeaders(examples);
    if (headers) response.headers = headers;
    response.content = errorContent(examples);
    responses[status] = response;
  }
  return responses;
}

function errorContent(examples: Record<string, ErrorExample>): JsonObject {
  const named: JsonObject = {};
  for (const [name, row] of Object.entries(examples)) {
    named[name] = { summary: row.summary, value: errorExampleBody(row) };
  }
  return { [JSON_MEDIA_TYPE]: { schema: componentRef("Error"), examples: named } };
}

const RESPONSE_HEADERS: Record<string, { name: string; description: string; type: "string" | "integer" }> = {
  allow: { name: "Allow", description: "The methods this path answers", type: "string" },
  "retry-after": { name: "Retry-After", description: "Seconds to wait before sending the request again", type: "integer" },
};

// A header whose rows at one status differ in value (503's Retry-After: 60 while every shard is
// closed, 5 for an overloaded one) lists the values instead of one example.
function responseHeaders(examples: Record<string, ErrorExample>): JsonObject | undefined {
  const values = new Map<string, Set<string>>();
  for (const row of Object.values(examples)) {
    for (const [key, value] of Object.entries(("headers" in row && row.headers) || {})) {
      if (!RESPONSE_HEADERS[key]) throw new Error(`response header ${key} has no description in RESPONSE_HEADERS`);
      values.set(key, (values.get(key) ?? new Set()).add(value));
    }
  }
  const headers: JsonObject = {};
  for (const [key, seen] of values) {
    const known = RESPONSE_HEADERS[key]!;
    const typed = [...seen].map((value) => (known.type === "integer" ? Number(value) : value));
    headers[known.name] =
      typed.length === 1
        ? { description: known.description, required: true, schema: { type: known.type }, example: typed[0]! }
        : { description: known.description, required: true, schema: { type: known.type, enum: typed } };
  }
  return Object.keys(headers).length > 0 ? headers : undefined;
}

/**
 * The fields of draft-ietf-httpapi-ratelimit-headers that every answer of a limited operation
 * carries, as a client of the standard tier gets them: `r` is 0 on the 429 alone (docs/api.md#rate-limits).
 */
function rateLimitHeaders(route: LimitedRoute, status: number): JsonObject {
  const policy = ratePolicy(route, "standard");
  return {
    "RateLimit-Policy": {
      description: `The client's limit on this operation: its tier's policy \`<operation>.<tier>\`, q requests per w seconds (${RATE_TIERS.join(", ")})`,
      required: true,
      schema: { type: "string" },
      example: `"${policy.name}";q=${policy.quota};w=${policy.windowSeconds}`,
    },
    RateLimit: {
      description:
        "r=0 when this request was over the limit, else r=1 (not over it: the limiter does not tell how many are left); t is the window in seconds, the longest wait until the count restarts",
      required: true,
      schema: { type: "string" },
      example: `"${policy.name}";r=${status === 429 ? 0 : 1};t=${policy.windowSeconds}`,
    },
  };
}

/** The events the notifier pushes to the app push service (docs/api.md#receipt-events). */
const WEBHOOKS: Record<
  string,
  {
    operationId: string;
    component: string;
    schema: z.ZodMiniType;
    summary: string;
    detail?: string;
    example: Json;
    otherExamples?: Record<string, { summary: string; value: Json }>;
  }
> = {
  "receipt.created": {
    operationId: "receiptCreated",
    component: "ReceiptCreatedEvent",
    schema: receiptCreatedEvent,
    summary:
      "A receipt was stored: the app shows it. Carries the receipt body as add stored it; for a receipt added in DR Retail, its model, its format and the original body",
    example: {
      event_id: "019aa8a4-3c1e-7d2b-8a41-6c0e5b2d8a01",
      type: "receipt.created",
      occurred_at: "2026-11-22T13:03:05.123Z",
      receipt_id: "019aa8a4-3c1e-7d2b-9f41-6c0e5b2d8a17",
      app_user_id: "au-7f3c9e",
      chain_id: "chain-nord",
      client_id: "pos-acme-01",
      created_at: "2026-11-22T13:03:05.123Z",
      receipt: {
        purchased_at: "2026-11-22T14:03:00+01:00",
        currency: "EUR",
        total: 598,
        line_items: [{ description: "Oat milk 1 l", quantity: 2, unit_price: 299, total: 598 }],
      },
    },
    otherExamples: {
      "dr-retail": {
        summary: "A receipt added in DR Retail v1.1: its model as `receipt`, with `format` and the body as sent as `original`",
        value: {
          event_id: "019aa8a4-3c1e-7d2b-8a41-6c0e5b2d8a02",
          type: "receipt.created",
          occurred_at: "2026-11-22T13:03:05.123Z",
          receipt_id: "019aa8a4-3c1e-7d2b-9f41-6c0e5b2d8a18",
          app_user_id: "au-7f3c9e",
          chain_id: "chain-nord",
          client_id: "pos-acme-01",
          created_at: "2026-11-22T13:03:05.123Z",
          receipt: DR_RETAIL_EXAMPLE_MAPPED as Json,
          format: "dr-retail/v1.1",
          original: DR_RETAIL_EXAMPLE as Json,
        },
      },
    },
  },
  "receipt.deleted": {
    operationId: "receiptDeleted",
    component: "ReceiptDeletedEvent",
    schema: receiptDeletedEvent,
    summary: "A receipt was deleted (an item returned): the app removes it",
    example: {
      event_id: "019aa8a5-0b7e-7d2b-8d2f-3e9a1c6b5d40",
      type: "receipt.deleted",
      occurred_at: "2026-11-22T13:05:10.482Z",
      receipt_id: "019aa8a4-3c1e-7d2b-9f41-6c0e5b2d8a17",
      app_user_id: "au-7f3c9e",
      chain_id: "chain-nord",
      client_id: "pos-acme-01",
    },
  },
  "app_user.erased": {
    operationId: "appUserErased",
    component: "AppUserErasedEvent",
    schema: appUserErasedEvent,
    summary: "An app user's data was erased everywhere (a shopper asked to be forgotten): the app drops all of it",
    detail:
      "The erasure reaches every store: in every shard their receipts, their events and failed notices, and " +
      "their Idempotency-Key answers (kept without the ID, so a till's retry replays); their archived receipts " +
      "in R2; their audit records keep a keyed hash in place of the ID. No Workflow param or result, log line, " +
      "trace attribute or metric holds the ID; only this event names it, until delivered and within the event " +
      "feed's window. Store by store: docs/storage.md, Personal data. Its push waits a claim's length (three times " +
      "the notifier's push timeout, 30 s) after its event_id was made, so that no event of a receipt it took " +
      "reaches the app after it.",
    example: {
      event_id: "019aa9f0-5d21-7d2b-a3c4-8e1f0b7d6c52",
      type: "app_user.erased",
      occurred_at: "2026-11-22T16:40:02.911Z",
      app_user_id: "au-7f3c9e",
      receipts: 3,
    },
  },
};

// What every push carries besides its body: the Standard Webhooks headers.
const WEBHOOK_HEADERS: Json[] = [
  ["webhook-id", "The event_id; the same for every retry of one event: deduplicate by it"],
  ["webhook-timestamp", "The attempt's time, Unix seconds"],
  [
    "webhook-signature",
    "`v1,` then the base64 HMAC-SHA256 of `<webhook-id>.<webhook-timestamp>.<body>`, one such signature per secret in " +
      "APP_PUSH_SECRET, separated by a space: while a secret is rotated there are two (old and new). Accept the push " +
      "when any one of them verifies with a secret you hold",
  ],
].map(([name, description]) => ({ name: name!, in: "header", required: true, description: description!, schema: { type: "string" } }));

function webhookOperation(webhook: (typeof WEBHOOKS)[string]): JsonObject {
  return {
    operationId: webhook.operationId,
    summary: webhook.summary,
    description:
      "POSTed by the notifier to the app push service, signed the Standard Webhooks way. Delivery is at least " +
      "once; a receipt's receipt.created never arrives after its receipt.deleted. See docs/api.md, Receipt events." +
      (webhook.detail ? ` ${webhook.detail}` : ""),
    // The push carries no credential of a security scheme: the app side checks webhook-signature.
    security: [],
    parameters: WEBHOOK_HEADERS,
    requestBody: { required: true, content: { [JSON_MEDIA_TYPE]: { schema: componentRef(webhook.component), ...webhookExamples(webhook) } } },
    responses: {
      "2XX": { description: "Acknowledged: delivered" },
      "408": { description: "Timed out: retried with growing delay, as a timeout or network failure is (a longer Retry-After is honoured)" },
      "429": { description: "Later, please: retried with growing delay (a longer Retry-After is honoured)" },
      "5XX": { description: "Failed: retried with growing delay, then kept as a failed notice for an operator" },
      default: {
        description: "Any other status (3xx, 400, 401, 403, 404, 410, ...): retrying cannot help, so it is kept as a failed notice for an operator at once",
      },
    },
  };
}

// One example, or several by name when an event comes in more than one form.
function webhookExamples(webhook: (typeof WEBHOOKS)[string]): JsonObject {
  if (!webhook.otherExamples) return { example: webhook.example };
  return { examples: { "our-shape": { summary: "A receipt added in our own shape", value: webhook.example }, ...webhook.otherExamples } };
}

function componentRef(name: string): JsonObject {
  return { $ref: `#/components/schemas/${name}` };
}

// The alternative bodies and the parts they share, each one component, the parts referred to by
// $ref rather than written out in every body: the two DR Retail versions share nearly all of
// theirs, and written out in both they grew the document by 163 KB and doubled the time the
// reference page took to show it. A media type has no words of its own in OpenAPI, so an
// alternative body's go on its schema.
function alternativeSchemas(body: NonNullable<DocumentedOperation["body"]>): JsonObject {
  const registry = z.registry<{ id: string }>();
  for (const [id, schema] of Object.entries(body.sharedParts ?? {})) registry.add(schema, { id });
  for (const alternative of body.alternatives ?? []) registry.add(alternative.schema, { id: alternative.component });
  const { schemas } = z.toJSONSchema(registry, { target: "draft-2020-12", io: "input", uri: (id) => componentRef(id).$ref as string });
  const descriptions = new Map((body.alternatives ?? []).map((alternative) => [alternative.component, alternative.description]));
  return Object.fromEntries(
    Object.entries(schemas).map(([id, schema]) => {
      const { $schema: _dialect, $id: _id, ...rest } = schema as JsonObject;
      return [id, descriptions.has(id) ? { description: descriptions.get(id)!, ...rest } : rest];
    }),
  );
}

// The `$schema` keyword is left out: a document of OpenAPI 3.1 already says its dialect.
function jsonSchema(schema: z.ZodMiniType, io: "input" | "output"): JsonObject {
  const { $schema: _dialect, ...rest } = z.toJSONSchema(schema, { target: "draft-2020-12", io }) as JsonObject;
  return rest;
}

function describe(schema: z.ZodMiniType): string {
  const description = z.toJSONSchema(schema, { io: "input" }).description;
  if (typeof description !== "string") throw new Error("a documented schema needs a description");
  return description;
}
