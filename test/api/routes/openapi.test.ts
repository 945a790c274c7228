import { describe, expect, it } from "vitest";
import committed from "../../../docs/openapi.json";
import { ROUTES } from "../../../src/api/route-table.ts";
import { openApiPath } from "../../../src/api/openapi/document.ts";
import { PATHS } from "../../../src/shared/paths.ts";
import { BASE, call, expectErrorShape } from "../../support/api.ts";

type PathItem = Record<string, unknown>;
const documentPaths = committed.paths as Record<string, PathItem>;

describe("GET /receipts/v2/openapi.json", () => {
  it("serves the committed docs/openapi.json with the answering origin as its one server, public and cacheable", async () => {
    const answer = await call(PATHS.openapi, { method: "GET" });
    expect(answer.status).toBe(200);
    expect(answer.headers.get("content-type")).toBe("application/json; charset=utf-8");
    expect(answer.headers.get("cache-control")).toBe("public, max-age=300");
    expect(answer.headers.get("access-control-allow-origin")).toBe("*");
    expect(answer.body).toEqual({ ...committed, servers: [{ url: new URL(BASE).origin, description: "This deployment" }] });
  });

  it("answers HEAD as GET, without a body", async () => {
    const answer = await call(PATHS.openapi, { method: "HEAD" });
    expect(answer.status).toBe(200);
    expect(answer.body).toBe("");
  });

  it.each(["POST", "PUT", "DELETE", "PATCH"])("%s: 405 with Allow: GET, HEAD and a message saying to use GET", async (method) => {
    const answer = await call(PATHS.openapi, { method });
    const message = expectErrorShape(answer, 405, "Method Not Allowed");
    expect(answer.headers.get("allow")).toBe("GET, HEAD");
    expect(message).toContain("use GET");
  });

  it("needs no token and no header at all", async () => {
    const answer = await call(PATHS.openapi, { method: "GET", headers: {} });
    expect(answer.status).toBe(200);
  });
});

describe("GET /receipts/v2/docs: the API reference page", () => {
  it("is HTML that loads only its own origin's files, public and cacheable", async () => {
    const answer = await call(PATHS.docs, { method: "GET" });
    expect(answer.status).toBe(200);
    expect(answer.headers.get("content-type")).toBe("text/html; charset=UTF-8");
    expect(answer.headers.get("cache-control")).toBe("public, max-age=300");
    const policy = answer.headers.get("content-security-policy") ?? "";
    expect(policy).toContain("default-src 'none'");
    expect(policy).toContain("script-src 'self';");
    expect(policy).toContain("connect-src 'self';");
    const page = String(answer.body);
    for (const source of page.matchAll(/(?:src|href)="([^"]+)"/g)) expect(source[1], "a relative address").not.toMatch(/^[a-z]+:|^\/\//);
    expect(page).toContain('src="docs/swagger-ui-bundle.js"');
  });

  it("answers HEAD as GET, without a body", async () => {
    const answer = await call(PATHS.docs, { method: "HEAD" });
    expect(answer.status).toBe(200);
    expect(answer.body).toBe("");
  });

  it.each(["POST", "PUT", "DELETE"])("%s: 405 with Allow: GET, HEAD", async (method) => {
    const answer = await call(PATHS.docs, { method });
    expectErrorShape(answer, 405, "Method Not Allowed");
    expect(answer.headers.get("allow")).toBe("GET, HEAD");
  });
});

describe("the OpenAPI document lists exactly the routes the Worker answers", () => {
  it("every POST operation as POST; the event feed, the status, a job, its file, the document and its reference as GET; and nothing else", () => {
    const listed = Object.entries(documentPaths).map(([path, item]) => `${Object.keys(item).join(",")} ${path}`);
    const answered = Object.values(ROUTES).map((route) => `${route.method.toLowerCase()} ${openApiPath(route.path)}`);
    expect(listed.sort()).toEqual(answered.sort());
  });

  it("every path and method in the document reaches its route: neither 404 nor 405", async () => {
    for (const [path, item] of Object.entries(documentPaths)) {
      for (const method of Object.keys(item)) {
        const answer = await call(path, { method: method.toUpperCase() });
        expect([404, 405], `${method} ${path}`).not.toContain(answer.status);
      }
    }
  });
});
