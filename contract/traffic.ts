/**
 * The requests of `npm run contract`, sent through the validating proxy: each operation's success,
 * a feed read, and one request for every error example the OpenAPI document gives (the scenarios of
 * test/api/routes/openapi-examples.test.ts, made here with real HTTP and the operator commands).
 */
import { SignJWT, base64url } from "jose";
import { openApiPath } from "../src/api/openapi/document.ts";
import { PATHS, jobPath } from "../src/shared/paths.ts";
import { DOCUMENTED_OPERATIONS } from "../src/api/openapi/documented-operations.ts";
import { APP_SCOPE, OPS_SCOPE, POS_SCOPE } from "../src/shared/types.ts";
import { npmRun } from "./service.ts";

/** A client as `npm run clients -- issue --json` prints it. */
export interface Client {
  client_id: string;
  client_secret: string;
}

/** What a request to the proxy brought back: its status and the violations Prism reported. */
export interface Checked {
  operation: string;
  example: string;
  status: number;
  expected: number | undefined;
  /** An error answer's message, to tell which refusal it was. */
  message: string;
  /** Prism's report of this exchange (its `sl-violations` header), response and request alike. */
  violations: { location: string[]; severity: string; message: string }[];
}

/**
 * Error examples no request through Prism can check, each with why: the document's other
 * examples all get a request.
 */
export const NOT_THROUGH_PRISM: Record<string, string> = {
  "wrong-method": "a method the path does not document: Prism finds no operation to check the answer against",
  internal: "a 500 needs a broken deployment (test/api/routes/openapi-examples.test.ts provokes it in workerd)",
  "not-json": "Prism parses a JSON request body itself and never forwards a malformed one (stoplightio/prism#2664)",
  "not-i-json": "Prism parses and re-serialises a JSON request body, dropping the duplicate member the service must see",
  "rate-limited":
    "a 429 needs a client past its limit, 1,200 adds, 300 deletes, 100 feed reads or 100 app-user job requests in 10 s, more than this check sends through Prism " +
    "(test/api/routes/openapi-examples.test.ts spends them in workerd)",
  "shard-overloaded": "a 503 needs a D1 that answers 'overloaded' (test/api/routes/openapi-examples.test.ts gives the Worker such a binding)",
};

/** The settings `npm start` runs with here, so every refusal can be provoked at once. */
export interface Service {
  /** Where the proxy answers. */
  proxy: string;
  /** The local state of this run's `npm start`, for the operator commands. */
  state: string;
  /** The token signing key the service runs with, to sign an expired token. */
  tokenKey: { kid: string; k: string };
  issuer: string;
  audience: string;
}

/** Sends every request; returns what each brought back, in order, and a POS client still usable. */
export async function sendTraffic(
  service: Service,
  statusOf: (path: string, method: string, example: string) => number | undefined,
): Promise<{ checked: Checked[]; pos: Client }> {
  const checked: Checked[] = [];
  const clients = (args: string[]) => npmRun("clients", [...args, "--persist-to", service.state]);
  const issue = async (args: string[]): Promise<Client> => JSON.parse((await clients(["issue", ...args, "--json"])).trim().split("\n").at(-1)!) as Client;

  /**
   * Sends one request through the proxy. `documented` is the document's path where it differs
   * from the path sent (a job's, `{job_id}` filled in); `succeeds` the status of its success.
   */
  async function send(
    path: string,
    example: string,
    init: { method?: string; headers?: Record<string, string>; body?: string; query?: string; documented?: string; succeeds?: number } = {},
  ): Promise<Response> {
    const method = init.method ?? (path === PATHS.events || path === PATHS.status || path === PATHS.openapi || path === PATHS.docs ? "GET" : "POST");
    const documented = init.documented ?? path;
    const succeeds = init.succeeds ?? 200;
    const response = await fetch(`${service.proxy}${path}${init.query ?? ""}`, { method, headers: init.headers, body: init.body, signal: AbortSignal.timeout(30_000) }).catch(
      (error: Error) => {
        throw new Error(`${method} ${path} (${example}) through Prism: ${error.message}${error.cause ? ` (${(error.cause as Error).message})` : ""}`);
      },
    );
    const text = await response.clone().text();
    const report = response.headers.get("sl-violations");
    checked.push({
      operation: `${method} ${documented}`,
      example,
      status: response.status,
      expected: example === "success" ? succeeds : statusOf(documented, method.toLowerCase(), example),
      message: /^\{"message":"([^"]*)"/.exec(text)?.[1] ?? "",
      violations: report ? (JSON.parse(report.replace(/^Too many violations! /, "")) as Checked["violations"]) : [],
    });
    if (example === "success" && response.status !== succeeds) {
      throw new Error(`${method} ${path} answered ${response.status} where it should succeed: ${checked.at(-1)!.message || text.slice(0, 200)}`);
    }
    return response;
  }

  const pos = await issue(["--chain", "c1"]);
  const other = await issue(["--chain", "c1"]);
  const app = await issue(["--app"]);
  const disabled = await issue(["--chain", "c1"]);
  const ops = await issue(["--ops"]);
  // Clients whose secrets are rotated after their tokens are issued (revoked-token, at the end).
  const rotatedPos = await issue(["--chain", "c1"]);
  const rotatedApp = await issue(["--app"]);
  const rotatedOps = await issue(["--ops"]);
  await clients(["disable", disabled.client_id]);

  const loginHeaders = (client: Client, scope = POS_SCOPE) => ({ client_id: client.client_id, client_secret: client.client_secret, token_type: "Bearer", scope });
  const login = async (client: Client, scope = POS_SCOPE, example = "success") => {
    const response = await send(PATHS.login, example, { headers: loginHeaders(client, scope) });
    return ((await response.json()) as { data: { access_token: string } }).data.access_token;
  };

  // login
  const posToken = await login(pos);
  const appToken = await login(app, APP_SCOPE);
  const { client_secret: _secret, scope: _scope, ...withoutSecret } = loginHeaders(pos);
  await send(PATHS.login, "missing-header", { headers: withoutSecret });
  await send(PATHS.login, "unusable-header", { headers: { ...loginHeaders(pos), client_id: "caf\u00e9" } });
  await send(PATHS.login, "token-type", { headers: { ...loginHeaders(pos), token_type: "MAC" } });
  await send(PATHS.login, "scope", { headers: { ...loginHeaders(pos), scope: "service.admin" } });
  await send(PATHS.login, "credentials", { headers: { ...loginHeaders(pos), client_secret: "not-the-secret" } });
  await send(PATHS.login, "disabled", { headers: loginHeaders(disabled) });
  await send(PATHS.login, "scope-not-granted", { headers: loginHeaders(app, POS_SCOPE) });
  // The local limiter's windows turn with the wall-clock minute: 11 tries reach a 429 even then.
  // Another client than the example's, which logs in with `pos` afterwards.
  const guessing = other;
  for (let i = 0; i < 11; i += 1) {
    const response = await fetch(`${service.proxy}${PATHS.login}`, { method: "POST", headers: { ...loginHeaders(guessing), client_secret: "guess" } });
    await response.arrayBuffer();
    if (response.status === 429) break;
  }
  await send(PATHS.login, "too-many-failures", { headers: { ...loginHeaders(guessing), client_secret: "guess" } });

  // add
  const body = () => structuredClone(DOCUMENTED_OPERATIONS[PATHS.add]!.body!.example as Record<string, unknown> & { line_items: Record<string, unknown>[] });
  const addHeaders = (change: Record<string, string> = {}) => ({
    Authorization: `Bearer ${posToken}`,
    client_id: pos.client_id,
    chain_id: "c1",
    app_user_id: `au-${crypto.randomUUID().slice(0, 8)}`,
    "Content-Type": "application/json",
    ...change,
  });
  const add = (example: string, headers: Record<string, string>, payload: unknown = body()) =>
    send(PATHS.add, example, { headers, body: typeof payload === "string" ? payload : JSON.stringify(payload) });
  const expired = await expiredToken(service, pos.client_id, POS_SCOPE);
  const key = `contract-${crypto.randomUUID()}`;
  const added = (await (await add("success", addHeaders({ "Idempotency-Key": key }))).json()) as { data: { receipt_id: string; app_user_id: string } };
  await add("success", addHeaders({ "Idempotency-Key": key, app_user_id: added.data.app_user_id }));
  const { chain_id: _chain, "Content-Type": _type, ...withoutChain } = addHeaders();
  await add("missing-header", withoutChain);
  await add("unusable-header", addHeaders({ app_user_id: "a\tb" }));
  await add("not-bearer", addHeaders({ Authorization: "Basic cG9zOnNlY3JldA==" }));
  await add("invalid-token", addHeaders({ Authorization: "Bearer not.a.token" }));
  await add("expired-token", addHeaders({ Authorization: `Bearer ${expired}` }));
  await add("wrong-scope", addHeaders({ Authorization: `Bearer ${appToken}`, client_id: app.client_id }));
  await add("unknown-client", addHeaders({ client_id: "nobody-contract" }));
  await add("disabled-client", addHeaders({ Authorization: `Bearer ${await signToken(service, disabled.client_id, POS_SCOPE, 0)}`, client_id: disabled.client_id }));
  await add("other-client", addHeaders({ client_id: other.client_id }));
  await add("chain", addHeaders({ chain_id: "another-chain" }));
  await add("media-type", addHeaders({ "Content-Type": "text/plain" }));
  await add("content-encoding", addHeaders({ "Content-Encoding": "gzip" }));
  await add("too-large", addHeaders(), { ...body(), note: "x".repeat(64 * 1024) });
  const [first, ...rest] = body().line_items;
  await add("body-rule", addHeaders(), { ...body(), currency: "eur", line_items: [{ ...first!, quantity: 0 }, ...rest] });
  await add("unknown-field", addHeaders(), { ...body(), totl: 447 });
  await add("idempotency-conflict", addHeaders({ "Idempotency-Key": key }));
  // DR Retail bodies under each profile's Content-Type, and their refusals. The profile goes
  // quoted, which the service takes as well: Prism's media-type parser (the content-type package)
  // refuses the unquoted `profile=https://…` the contract gives, whose '/' and ':' RFC 9110 wants
  // quoted, and answers 500 itself without forwarding.
  const quoted = (mediaType: string) => mediaType.replace(/profile=([^;"]+)/, 'profile="$1"');
  const alternatives = DOCUMENTED_OPERATIONS[PATHS.add]!.body!.alternatives ?? [];
  for (const { mediaType, example } of alternatives) await add("success", addHeaders({ "Content-Type": quoted(mediaType) }), example);
  // A full card number in a card-number field is refused; in free text it is masked (a 200).
  const v11 = alternatives.find(({ mediaType }) => mediaType.includes("v1.1"))!;
  const withCard = structuredClone(v11.example) as { payments: { tender: Record<string, unknown> }[] };
  withCard.payments[0]!.tender.bank_identification_number = "4111111111111111";
  await add("card-number", addHeaders({ "Content-Type": quoted(v11.mediaType) }), withCard);
  await add("unknown-profile", addHeaders({ "Content-Type": quoted("application/json;profile=https://example.com/receipt") }));
  await add("media-type-parameter", addHeaders({ "Content-Type": `application/json;profile="https://example.com/a";profile="https://example.com/b"` }));
  const dr = alternatives.at(-1)!;
  const wrongQuantity = structuredClone(dr.example) as { items: { quantity: { value: unknown } }[] };
  wrongQuantity.items[0]!.quantity.value = "2";
  await add("dr-body-rule", addHeaders({ "Content-Type": quoted(dr.mediaType) }), wrongQuantity);

  // delete
  const deleteHeaders = (change: Record<string, string> = {}) => ({
    Authorization: `Bearer ${posToken}`,
    client_id: pos.client_id,
    chain_id: "c1",
    app_user_id: added.data.app_user_id,
    receipt_id: added.data.receipt_id,
    ...change,
  });
  const remove = (example: string, headers: Record<string, string>) => send(PATHS.delete, example, { headers });
  const { receipt_id: _receipt, app_user_id: _user, ...withoutReceipt } = deleteHeaders();
  await remove("missing-header", withoutReceipt);
  await remove("unusable-header", deleteHeaders({ receipt_id: "r".repeat(257) }));
  await remove("not-bearer", deleteHeaders({ Authorization: "Basic cG9zOnNlY3JldA==" }));
  await remove("invalid-token", deleteHeaders({ Authorization: "Bearer not.a.token" }));
  await remove("expired-token", deleteHeaders({ Authorization: `Bearer ${expired}` }));
  await remove("wrong-scope", deleteHeaders({ Authorization: `Bearer ${appToken}`, client_id: app.client_id }));
  await remove("unknown-client", deleteHeaders({ client_id: "nobody-contract" }));
  await remove("disabled-client", deleteHeaders({ Authorization: `Bearer ${await signToken(service, disabled.client_id, POS_SCOPE, 0)}`, client_id: disabled.client_id }));
  await remove("other-client", deleteHeaders({ client_id: other.client_id }));
  await remove("mismatch", deleteHeaders({ chain_id: "another-chain", app_user_id: "au-someone-else" }));
  await remove("success", deleteHeaders());
  await remove("no-receipt", deleteHeaders());

  // The event feed: the whole of it, a page of one, and the page after it.
  const feed = (example: string, headers: Record<string, string>, query = "") => send(PATHS.events, example, { headers, query });
  const appHeaders = (change: Record<string, string> = {}) => ({ Authorization: `Bearer ${appToken}`, client_id: app.client_id, ...change });
  await feed("success", appHeaders());
  const page = (await (await feed("success", appHeaders(), "?limit=1")).json()) as { data: { events: { event_id: string }[] } };
  const firstEvent = page.data.events[0]?.event_id;
  if (firstEvent) await feed("success", appHeaders(), `?after=${firstEvent}&limit=100`);
  await feed("missing-header", {});
  await feed("unusable-header", appHeaders({ client_id: "caf\u00e9" }));
  await feed("not-bearer", appHeaders({ Authorization: "Basic cG9zOnNlY3JldA==" }));
  await feed("invalid-token", appHeaders({ Authorization: "Bearer not.a.token" }));
  await feed("expired-token", appHeaders({ Authorization: `Bearer ${await expiredToken(service, app.client_id, APP_SCOPE)}` }));
  await feed("wrong-scope", { Authorization: `Bearer ${posToken}`, client_id: pos.client_id });
  await feed("unknown-client", appHeaders({ client_id: "nobody-contract" }));
  await feed("disabled-client", { Authorization: `Bearer ${await signToken(service, disabled.client_id, APP_SCOPE, 0)}`, client_id: disabled.client_id });
  await feed("other-client", appHeaders({ client_id: rotatedApp.client_id }));
  await feed("after", appHeaders(), "?after=not-an-event");
  await feed("limit", appHeaders(), "?limit=500");

  // The service's status, for an operator's client.
  const opsToken = await login(ops, OPS_SCOPE);
  const status = (example: string, headers: Record<string, string>) => send(PATHS.status, example, { headers });
  const opsHeaders = (change: Record<string, string> = {}) => ({ Authorization: `Bearer ${opsToken}`, client_id: ops.client_id, ...change });
  await status("success", opsHeaders());
  await status("missing-header", {});
  await status("unusable-header", opsHeaders({ client_id: "caf\u00e9" }));
  await status("not-bearer", opsHeaders({ Authorization: "Basic cG9zOnNlY3JldA==" }));
  await status("invalid-token", opsHeaders({ Authorization: "Bearer not.a.token" }));
  await status("expired-token", opsHeaders({ Authorization: `Bearer ${await expiredToken(service, ops.client_id, OPS_SCOPE)}` }));
  await status("wrong-scope", { Authorization: `Bearer ${appToken}`, client_id: app.client_id });
  await status("unknown-client", opsHeaders({ client_id: "nobody-contract" }));
  await status("disabled-client", { Authorization: `Bearer ${await signToken(service, disabled.client_id, OPS_SCOPE, 0)}`, client_id: disabled.client_id });
  await status("other-client", opsHeaders({ client_id: rotatedOps.client_id }));

  // The app-user jobs: an export to its file, an erasure, and every refusal of the four routes.
  const appJob = (change: Record<string, string> = {}) => ({ ...appHeaders(), app_user_id: "au-contract", "Idempotency-Key": `contract-${crypto.randomUUID()}`, ...change });
  const start = (path: string, example: string, headers: Record<string, string>) => send(path, example, { headers, succeeds: 202 });
  const started = async (path: string, headers: Record<string, string>) => ((await (await start(path, "success", headers)).json()) as { data: { job_id: string } }).data.job_id;
  const exported = await started(PATHS.exportAppUser, appJob({ app_user_id: added.data.app_user_id }));
  const erasure = await started(PATHS.eraseAppUser, appJob());
  const readJob = (file: "state" | "export", id: string, example: string, headers: Record<string, string>) =>
    send(jobPath(id, file), example, { method: "GET", headers, documented: openApiPath(file === "state" ? PATHS.job : PATHS.jobExport) });
  // The export runs in npm start's Workflows; it first waits FEED_SETTLE_SECONDS.
  for (let tries = 0; ; tries += 1) {
    const state = ((await (await readJob("state", exported, "success", appHeaders())).json()) as { data: { state: string } }).data.state;
    if (state === "complete") break;
    if (state === "failed" || tries > 120) throw new Error(`the contract's export ended ${state}`);
    await new Promise((resolve) => setTimeout(resolve, 500));
  }
  await readJob("export", exported, "success", appHeaders());
  await readJob("export", erasure, "not-complete", appHeaders());
  for (const path of [PATHS.exportAppUser, PATHS.eraseAppUser]) {
    const key = `contract-${crypto.randomUUID()}`;
    await start(path, "missing-header", { ...appHeaders() });
    await start(path, "malformed-app-user-id", appJob({ app_user_id: "a\tb" }));
    await start(path, "unusable-header", appJob({ client_id: "caf\u00e9" }));
    await start(path, "not-bearer", appJob({ Authorization: "Basic cG9zOnNlY3JldA==" }));
    await start(path, "invalid-token", appJob({ Authorization: "Bearer not.a.token" }));
    await start(path, "expired-token", appJob({ Authorization: `Bearer ${await expiredToken(service, app.client_id, APP_SCOPE)}` }));
    await start(path, "wrong-scope", appJob({ Authorization: `Bearer ${posToken}`, client_id: pos.client_id }));
    await start(path, "unknown-client", appJob({ client_id: "nobody-contract" }));
    await start(path, "disabled-client", appJob({ Authorization: `Bearer ${await signToken(service, disabled.client_id, APP_SCOPE, 0)}`, client_id: disabled.client_id }));
    await start(path, "other-client", appJob({ client_id: rotatedApp.client_id }));
    await start(path, "success", appJob({ app_user_id: "au-contract-1", "Idempotency-Key": key }));
    await start(path, "job-conflict", appJob({ app_user_id: "au-contract-2", "Idempotency-Key": key }));
  }
  for (const file of ["state", "export"] as const) {
    await readJob(file, exported, "missing-header", {});
    await readJob(file, exported, "unusable-header", appHeaders({ client_id: "caf\u00e9" }));
    await readJob(file, exported, "not-bearer", appHeaders({ Authorization: "Basic cG9zOnNlY3JldA==" }));
    await readJob(file, exported, "invalid-token", appHeaders({ Authorization: "Bearer not.a.token" }));
    await readJob(file, exported, "expired-token", appHeaders({ Authorization: `Bearer ${await expiredToken(service, app.client_id, APP_SCOPE)}` }));
    await readJob(file, exported, "wrong-scope", { Authorization: `Bearer ${posToken}`, client_id: pos.client_id });
    await readJob(file, exported, "unknown-client", appHeaders({ client_id: "nobody-contract" }));
    await readJob(file, exported, "disabled-client", { Authorization: `Bearer ${await signToken(service, disabled.client_id, APP_SCOPE, 0)}`, client_id: disabled.client_id });
    await readJob(file, exported, "other-client", appHeaders({ client_id: rotatedApp.client_id }));
    await readJob(file, crypto.randomUUID(), "no-job", appHeaders());
  }

  // The document and the reference page.
  await send(PATHS.openapi, "success");
  await send(PATHS.docs, "success");

  // A token issued before its client's secret was rotated (CLIENT_CACHE_SECONDS is 0 here).
  const [oldPos, oldApp, oldOps] = [await login(rotatedPos), await login(rotatedApp, APP_SCOPE), await login(rotatedOps, OPS_SCOPE)];
  await clients(["rotate", rotatedPos.client_id]);
  await clients(["rotate", rotatedApp.client_id]);
  await clients(["rotate", rotatedOps.client_id]);
  await add("revoked-token", addHeaders({ Authorization: `Bearer ${oldPos}`, client_id: rotatedPos.client_id }));
  await remove("revoked-token", deleteHeaders({ Authorization: `Bearer ${oldPos}`, client_id: rotatedPos.client_id }));
  await feed("revoked-token", { Authorization: `Bearer ${oldApp}`, client_id: rotatedApp.client_id });
  for (const path of [PATHS.exportAppUser, PATHS.eraseAppUser]) await start(path, "revoked-token", appJob({ Authorization: `Bearer ${oldApp}`, client_id: rotatedApp.client_id }));
  for (const file of ["state", "export"] as const) await readJob(file, exported, "revoked-token", { Authorization: `Bearer ${oldApp}`, client_id: rotatedApp.client_id });
  await status("revoked-token", { Authorization: `Bearer ${oldOps}`, client_id: rotatedOps.client_id });

  // No open shard: both closed by the operator (SHARD_STATES_SECONDS is 0 here), then opened again.
  const shards = (args: string[]) => npmRun("shards", [...args, "--persist-to", service.state]);
  await shards(["close", "s1"]);
  await shards(["close", "s2", "--force"]);
  try {
    await add("no-open-shard", addHeaders());
  } finally {
    await shards(["open", "s1"]);
    await shards(["open", "s2"]);
  }
  return { checked, pos };
}

/** A token of the service's own key, signed here; `ageSeconds` back from now. */
async function signToken(service: Service, clientId: string, scope: string, ageSeconds: number): Promise<string> {
  const now = Math.floor(Date.now() / 1000) - ageSeconds;
  return new SignJWT({ scope, jti: crypto.randomUUID() })
    .setProtectedHeader({ alg: "HS256", kid: service.tokenKey.kid, typ: "JWT" })
    .setIssuer(service.issuer)
    .setAudience(service.audience)
    .setSubject(clientId)
    .setIssuedAt(now)
    .setExpirationTime(now + 3600)
    .sign(base64url.decode(service.tokenKey.k));
}

/** A token of the service's key that expired a minute ago. */
function expiredToken(service: Service, clientId: string, scope: string): Promise<string> {
  return signToken(service, clientId, scope, 3660);
}
