/**
 * The OpenAPI document on Node, where the validator's ajv may compile code (workerd forbids
 * `new Function`): the committed file is what the generator makes now, it is valid OpenAPI 3.1,
 * and its examples and header schemas say what the Worker's schemas say.
 */
import { readFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import path from "node:path";
import { Validator } from "@seriousme/openapi-schema-validator";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { STATUS_WORDS } from "../../src/api/errors.ts";
import { commonErrors, errorExampleBody, serializeOpenApiDocument, openApiPath } from "../../src/api/openapi/document.ts";
import { DOCUMENTED_OPERATIONS } from "../../src/api/openapi/documented-operations.ts";
import { allowedMethods, routeAt } from "../../src/api/route-table.ts";
import { pushNotice } from "../../src/notifier/push.ts";
import { PATHS } from "../../src/shared/paths.ts";
import { errorResponse } from "../../src/shared/schemas.ts";

const COMMITTED = readFileSync(path.join(import.meta.dirname, "../../docs/openapi.json"), "utf8");

interface HeaderParameter {
  name: string;
  in: string;
  required: boolean;
  schema: { maxLength?: number; pattern: string };
  example?: string;
}

describe("OpenAPI document: generated from the schemas and committed", () => {
  it("docs/openapi.json is what the generator makes now (after changing a schema, run npm run openapi)", () => {
    expect(serializeOpenApiDocument()).toBe(COMMITTED);
  });

  it("is a valid OpenAPI 3.1 document whose every $ref resolves", async () => {
    const validator = new Validator();
    const result = await validator.validate(JSON.parse(COMMITTED));
    expect(result.errors).toBeUndefined();
    expect(result.valid).toBe(true);
    expect(validator.version).toBe("3.1");
    expect(() => validator.resolveRefs()).not.toThrow();
  });
});

describe("OpenAPI document: its examples pass the Worker's own schemas", () => {
  for (const [path, operation] of Object.entries(DOCUMENTED_OPERATIONS)) {
    it(`${path}: the success example, the body example and every header example`, () => {
      expect(operation.success.schema.safeParse(operation.success.example).error).toBeUndefined();
      if (operation.body) expect(operation.body.schema.safeParse(operation.body.example).error).toBeUndefined();
      for (const body of operation.body?.alternatives ?? []) expect(body.schema.safeParse(body.example).error, body.mediaType).toBeUndefined();
      const examples = Object.fromEntries(
        headerParameters(path).flatMap((parameter) => (parameter.example === undefined ? [] : [[parameter.name, parameter.example]])),
      );
      for (const [name, example] of Object.entries(examples)) {
        expect(operation.headers.shape[name]!.safeParse(example).error, name).toBeUndefined();
      }
      for (const parameter of headerParameters(path, "query")) {
        expect(parameter.required, parameter.name).toBe(false);
        expect(operation.query!.shape[parameter.name]!.safeParse(parameter.example).error, parameter.name).toBeUndefined();
      }
    });

    it(`${path}: every error example is an error body whose status_code and status word fit its status`, () => {
      const route = routeAt(path);
      const common = commonErrors(path, allowedMethods(route), route.method);
      for (const row of Object.values({ ...operation.errors, ...common })) {
        const body = errorExampleBody(row);
        expect(errorResponse.safeParse(body).error).toBeUndefined();
        expect(body.status_code).toBe(row.status);
        // docs/api.md#common-rules: the one exception to the status words is login's 403 (docs/api.md#login-errors).
        expect(body.status).toBe(path === PATHS.login && row.status === 403 ? "Not Acceptable" : STATUS_WORDS[row.status]);
      }
    });
  }

  it("every header parameter is required exactly when the Worker's schema requires it", () => {
    for (const [path, operation] of Object.entries(DOCUMENTED_OPERATIONS)) {
      for (const parameter of headerParameters(path)) {
        const field = operation.headers.shape[parameter.name]!;
        expect(parameter.required, `${path} ${parameter.name}`).toBe(!field.safeParse(undefined).success);
      }
    }
  });
});

describe("OpenAPI document: a header's JSON Schema accepts exactly what the Worker accepts", () => {
  // Printable ASCII, the white space and control characters around it, and a few beyond ASCII.
  const character = fc.oneof(
    fc.integer({ min: 0x20, max: 0x7e }).map((code) => String.fromCharCode(code)),
    fc.constantFrom(" ", "\t", "\u0000", "\u007f", "\u00e9", "\u2028", "\u{1F9FE}"),
  );
  const value = fc.oneof(
    fc.string({ unit: character, maxLength: 12 }),
    fc.string({ unit: character, minLength: 250, maxLength: 262 }),
  );

  for (const [path, operation] of Object.entries(DOCUMENTED_OPERATIONS)) {
    for (const parameter of headerParameters(path)) {
      it(`${path} ${parameter.name}`, () => {
        const pattern = new RegExp(parameter.schema.pattern, "u");
        const maxLength = parameter.schema.maxLength ?? Infinity;
        const field = operation.headers.shape[parameter.name]!;
        fc.assert(
          fc.property(value, (text) => {
            // JSON Schema counts code points, as spreading a string does.
            const documented = [...text].length <= maxLength && pattern.test(text);
            expect(field.safeParse(text).success).toBe(documented);
          }),
        );
      });
    }
  }
});

function headerParameters(path: string, where = "header"): HeaderParameter[] {
  const document: { paths: Record<string, Record<string, { parameters: HeaderParameter[] }>> } = JSON.parse(COMMITTED);
  const method = routeAt(path).method.toLowerCase();
  return document.paths[openApiPath(path)]![method]!.parameters.filter((parameter) => parameter.in === where);
}

describe("OpenAPI document: each webhook's responses say what the notifier does with that answer", () => {
  const document = JSON.parse(COMMITTED) as { webhooks: Record<string, { post: { responses: Record<string, { description: string }> } }> };
  let server: Server;
  let url = "";
  beforeAll(async () => {
    // Answers with the status the request's path names.
    server = createServer((request, response) => void request.resume().on("end", () => response.writeHead(Number(request.url!.slice(1))).end()));
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

  it.each([200, 204, 301, 400, 401, 404, 408, 410, 422, 429, 500, 503])("an answer %i", async (status) => {
    const key = await crypto.subtle.importKey("raw", new Uint8Array(32), { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
    const result = await pushNotice({ url: `${url}/${status}`, keys: [key] }, "event-1", "{}", new Date(), 5_000);
    const fate = result.ok ? /delivered/ : result.retryable ? /retried/ : /failed notice for an operator at once/;
    for (const [name, webhook] of Object.entries(document.webhooks)) {
      const { responses } = webhook.post;
      const response = responses[String(status)] ?? responses[`${String(status)[0]}XX`] ?? responses.default;
      expect(response?.description, name).toMatch(fate);
    }
  });
});
