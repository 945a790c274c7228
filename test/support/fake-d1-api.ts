/**
 * A small stand-in for the Cloudflare API that the remote operator commands call
 * (scripts/lib/d1-remote.ts), on this machine: the one account the credentials reach, a config's
 * shards as its D1 databases, and D1's query endpoint, which runs each received `{sql, params}` on
 * a shard of a real local state (Miniflare's D1), its params bound as the strings they are, as the
 * real API binds them: a statement whose meaning changes when its numbers are strings returns
 * other rows here too. It answers as the API does: `{success, errors, messages, result}`.
 */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { localState } from "../../scripts/lib/local-state.ts";
import { readShards } from "../../scripts/lib/shards.ts";

/** The one account of the fake, which every token reaches. */
export const FAKE_ACCOUNT = "0123456789abcdef0123456789abcdef";

const BASE_PATH = "/client/v4";

/** A request the fake received: method, path with query, and its JSON body. */
export interface FakeRequest {
  method: string;
  path: string;
  body?: unknown;
}

/** The running fake: its base URL (for CLOUDFLARE_API_BASE_URL), what it received, and its end. */
export interface FakeD1Api {
  url: string;
  requests: FakeRequest[];
  close(): Promise<void>;
}

/** The uuid the fake gives a shard's database. */
export function fakeDatabaseId(databaseName: string): string {
  return `fake-${databaseName}`;
}

/**
 * Starts the fake on a free port: `token` is the one credential it accepts (as a Bearer token);
 * the databases are the shards `config` declares, on the local state in `persistTo`.
 */
export async function startFakeD1Api({ token, config, persistTo }: { token: string; config: string; persistTo: string }): Promise<FakeD1Api> {
  const shards = readShards(config).map((shard) => ({ ...shard, config }));
  const state = localState({ remote: false, persistTo }, config);
  const requests: FakeRequest[] = [];

  async function answer(request: IncomingMessage, body: unknown): Promise<[number, unknown]> {
    if (request.headers.authorization !== `Bearer ${token}`) return failure(403, 10000, "Authentication error");
    const url = new URL(request.url ?? "/", "http://fake");
    // Served under a path, as the real API is, so that a runner that drops its base URL's path fails.
    if (!url.pathname.startsWith(BASE_PATH)) return failure(404, 7003, `No route for that URI: ${url.pathname}`);
    url.pathname = url.pathname.slice(BASE_PATH.length);
    if (request.method === "GET" && url.pathname === "/accounts") return success([{ id: FAKE_ACCOUNT, name: "Fake account" }]);
    const databases = `/accounts/${FAKE_ACCOUNT}/d1/database`;
    if (request.method === "GET" && url.pathname === databases) {
      // As the real API: a name filter that matches by substring.
      const name = url.searchParams.get("name") ?? "";
      return success(shards.filter((shard) => shard.database_name.includes(name)).map((shard) => ({ name: shard.database_name, uuid: fakeDatabaseId(shard.database_name) })));
    }
    const query = new RegExp(`^${databases}/([^/]+)/query$`).exec(url.pathname);
    const shard = query && shards.find((each) => fakeDatabaseId(each.database_name) === decodeURIComponent(query[1]!));
    if (request.method === "POST" && query && !shard) return failure(404, 7404, "The database could not be found");
    if (request.method === "POST" && shard) {
      const batch = (body as { batch?: unknown } | undefined)?.batch;
      const valid = Array.isArray(batch) && batch.every((each: { sql?: unknown; params?: unknown }) => typeof each?.sql === "string" && (each.params === undefined || (Array.isArray(each.params) && each.params.every((param) => typeof param === "string"))));
      if (!valid) return failure(400, 7400, "The request is malformed: batch must be a list of {sql, params}, params a list of strings");
      try {
        const results = await state.batch(shard, (batch as { sql: string; params?: string[] }[]).map(({ sql, params }) => ({ sql, params: params ?? [] })));
        return success(results.map(({ results: rows, meta }) => ({ results: rows, success: true, meta })));
      } catch (error) {
        return failure(400, 7500, `${(error as Error).message}: SQLITE_ERROR`);
      }
    }
    return failure(404, 7003, `No route for that URI: ${request.method} ${url.pathname}`);
  }

  const server = createServer((request: IncomingMessage, response: ServerResponse) => {
    let text = "";
    request.setEncoding("utf8").on("data", (chunk: string) => (text += chunk));
    request.on("end", () => {
      let body: unknown;
      try {
        body = text === "" ? undefined : JSON.parse(text);
      } catch {
        body = text;
      }
      requests.push({ method: request.method ?? "", path: request.url ?? "", body });
      void answer(request, body).then(([status, json]) => {
        response.writeHead(status, { "Content-Type": "application/json" });
        response.end(JSON.stringify(json));
      });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}${BASE_PATH}`,
    requests,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

function success(result: unknown): [number, unknown] {
  return [200, { success: true, errors: [], messages: [], result }];
}

function failure(status: number, code: number, message: string): [number, unknown] {
  return [status, { success: false, errors: [{ code, message }], messages: [], result: null }];
}
