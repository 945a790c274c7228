/**
 * The typed POS client of receipts.v2. Dependency-free at run time and fetch-based, so it runs
 * in Node ≥ 20, browsers and Workers; its types come from the schemas the Worker validates with.
 *
 * @example
 * const client = new ReceiptsClient({ baseUrl: "https://receipts.example.com", clientId, clientSecret });
 * const receipt = await client.add(body, { chainId: "c1", appUserId: "au-7f3c9e" });
 * await client.delete({ receiptId: receipt.receipt_id, chainId: "c1", appUserId: "au-7f3c9e" });
 */
import type * as z from "zod/mini";
import { PATHS } from "../shared/paths.ts";
import { MAX_HEADER_TEXT, isHeaderText } from "./header-text.ts";
import type { DrRetailInput } from "../shared/dr-retail.ts";
import { drRetailContentType, type DrRetailVersion } from "../shared/dr-retail-profiles.ts";
import type { AddResponse, DeleteResponse, ErrorResponse, LoginResponse, receiptBody } from "../shared/schemas.ts";

export { RETURN_CODE_VERSION, ReturnCodeError, makeReturnCode, parseReturnCode, type ReturnCodeIds } from "./return-code.ts";

/** A receipt as add takes it (docs/api.md#add). */
export type Receipt = z.input<typeof receiptBody>;

/** A receipt in Kivra's DR Retail, as add takes it with its profile (docs/api.md#dr-retail). */
export type DrRetailReceipt = DrRetailInput;

export type { DrRetailVersion };

/** What the client needs of `fetch`; the global one, a Worker's service binding or a test's. */
export type FetchLike = (input: string, init: RequestInit) => Promise<Response>;

/** Options of {@link ReceiptsClient}. */
export interface ReceiptsClientOptions {
  /** Where receipts.v2 answers, without the path: `https://receipts.example.com`. */
  baseUrl: string;
  /** Issued by the operator. */
  clientId: string;
  /** Issued by the operator; sent only to login. */
  clientSecret: string;
  /** Defaults to the global fetch. */
  fetch?: FetchLike;
  /**
   * How login and add retry network failures and 5xx answers: `attempts` in all (default 4),
   * waiting about `delayMs` (default 200), then twice that, and so on. An answer that says how
   * long to wait (`Retry-After` on a 429 over the client's limit, or on a 503) is waited out
   * instead, on add and delete alike, when it is at most `maxWaitSeconds` (default 30);
   * a longer one reaches the caller as a {@link ReceiptsError} with `retryAfterSeconds`.
   */
  retry?: { attempts?: number; delayMs?: number; maxWaitSeconds?: number };
}

/** A refusal or failure the service answered, with its error body (docs/api.md#errors). */
export class ReceiptsError extends Error {
  override name = "ReceiptsError";
  /** The HTTP status, equal to the body's status_code. */
  readonly status: number;
  /** The body's status word; login's 403 says `Not Acceptable` (docs/api.md#login-errors). */
  readonly statusWord: string;
  /** Seconds to wait before trying again, when the service said so (a 429, or a 503). */
  readonly retryAfterSeconds: number | undefined;

  constructor(status: number, statusWord: string, message: string, retryAfterSeconds?: number) {
    super(message);
    this.status = status;
    this.statusWord = statusWord;
    this.retryAfterSeconds = retryAfterSeconds;
  }
}

// Renew a token this long before it expires, so that no call meets the expiry on its way.
const RENEW_BEFORE_EXPIRY_SECONDS = 60;

/**
 * Calls receipts.v2 for one client. Logs in on first use, reuses the token for every call,
 * renews it a minute before it expires, and once more when the service refuses it anyway (a
 * clock that runs differently, a retired signing key). Safe to share between concurrent calls.
 */
export class ReceiptsClient {
  readonly #baseUrl: string;
  readonly #clientId: string;
  readonly #clientSecret: string;
  readonly #fetch: FetchLike;
  readonly #attempts: number;
  readonly #delayMs: number;
  readonly #maxWaitMs: number;
  #token: { value: string; renewAt: number } | undefined;
  #pendingLogin: Promise<string> | undefined;

  /** @throws TypeError naming an option that is missing or unusable. */
  constructor(options: ReceiptsClientOptions) {
    this.#baseUrl = checkedBaseUrl(options.baseUrl);
    this.#clientId = checkedHeader("clientId", options.clientId);
    this.#clientSecret = checkedHeader("clientSecret", options.clientSecret);
    // Called unbound, a browser's or a Worker's global fetch throws "Illegal invocation".
    this.#fetch = options.fetch ?? ((input, init) => fetch(input, init));
    this.#attempts = checkedCount("retry.attempts", options.retry?.attempts ?? 4, 1);
    this.#delayMs = checkedCount("retry.delayMs", options.retry?.delayMs ?? 200, 0);
    this.#maxWaitMs = checkedCount("retry.maxWaitSeconds", options.retry?.maxWaitSeconds ?? 30, 0) * 1000;
  }

  /** Logs in now, keeping the token for later calls, and returns it (docs/api.md#login). */
  async login(): Promise<LoginResponse["data"]> {
    const answer = await this.#send<LoginResponse>(PATHS.login, {
      headers: { client_id: this.#clientId, client_secret: this.#clientSecret, token_type: "Bearer", scope: "service.pos" },
      // Login's 429 follows failed logins: the same secret would only fail again.
      retry: true,
      waitWhenTold: false,
    });
    const lifetime = Math.max(0, answer.data.expires_in - RENEW_BEFORE_EXPIRY_SECONDS);
    this.#token = { value: answer.data.access_token, renewAt: Date.now() + lifetime * 1000 };
    return answer.data;
  }

  /**
   * Adds a receipt for an app user (docs/api.md#add) and returns what the service stored. Network
   * failures and 5xx answers are retried under one Idempotency-Key, so a retry never stores a
   * second receipt; a 429 over the client's limit is waited out as its Retry-After says and sent
   * again under that key. Pass your own key (such as the till's receipt number) to retry safely
   * even after the process itself failed; otherwise a random one is made for this call.
   */
  async add(
    receipt: Receipt,
    options: { chainId: string; appUserId: string; idempotencyKey?: string },
  ): Promise<AddResponse["data"]> {
    return this.#add(JSON.stringify(receipt), "application/json", options);
  }

  /**
   * Adds a receipt written in Kivra's DR Retail of `version` (docs/api.md#dr-retail), as a till
   * that already sends digital receipts there has it, and returns what the service stored; retried
   * as {@link add} is. Pass the body as text to send the exact bytes the till wrote: the service
   * stores and pushes them as sent.
   */
  async addDrRetail(
    receipt: DrRetailReceipt | string,
    options: { version: DrRetailVersion; chainId: string; appUserId: string; idempotencyKey?: string },
  ): Promise<AddResponse["data"]> {
    const text = typeof receipt === "string" ? receipt : JSON.stringify(receipt);
    return this.#add(text, drRetailContentType(options.version), options);
  }

  async #add(
    body: string,
    contentType: string,
    options: { chainId: string; appUserId: string; idempotencyKey?: string },
  ): Promise<AddResponse["data"]> {
    const answer = await this.#authorized<AddResponse>(PATHS.add, {
      headers: {
        client_id: this.#clientId,
        chain_id: options.chainId,
        app_user_id: options.appUserId,
        "Content-Type": contentType,
        "Idempotency-Key": options.idempotencyKey ?? crypto.randomUUID(),
      },
      // Serialised once: the service compares a retry's body byte for byte with the first.
      body,
      retry: true,
      waitWhenTold: true,
    });
    return answer.data;
  }

  /**
   * Removes a receipt; the service notifies its app user (docs/api.md#delete). A network failure or
   * 500 is not retried: a retry after a lost answer would meet the receipt gone (406), so that is
   * left to the caller. An answer that says the service did nothing and when to come back (a 429
   * over the client's limit, a 503 of an overloaded shard) is waited out and sent again.
   */
  async delete(ids: { receiptId: string; chainId: string; appUserId: string }): Promise<DeleteResponse> {
    return this.#authorized<DeleteResponse>(PATHS.delete, {
      headers: { receipt_id: ids.receiptId, client_id: this.#clientId, chain_id: ids.chainId, app_user_id: ids.appUserId },
      retry: false,
      waitWhenTold: true,
    });
  }

  async #authorized<T>(path: string, request: Call): Promise<T> {
    const token = await this.#currentToken();
    try {
      return await this.#send<T>(path, withToken(request, token));
    } catch (error) {
      if (!isTokenRefusal(error)) throw error;
      // Another call may have renewed it meanwhile; only the refused token is dropped.
      if (this.#token?.value === token) this.#token = undefined;
      return this.#send<T>(path, withToken(request, await this.#currentToken()));
    }
  }

  // Concurrent calls share one login rather than each starting its own.
  async #currentToken(): Promise<string> {
    if (this.#token && Date.now() < this.#token.renewAt) return this.#token.value;
    this.#pendingLogin ??= this.login()
      .then((data) => data.access_token)
      .finally(() => {
        this.#pendingLogin = undefined;
      });
    return this.#pendingLogin;
  }

  async #send<T>(path: string, request: Call): Promise<T> {
    const url = this.#baseUrl + path;
    for (let attempt = 1; ; attempt += 1) {
      const last = attempt >= this.#attempts;
      let response: Response;
      try {
        response = await this.#fetch(url, { method: "POST", headers: request.headers, body: request.body });
      } catch (error) {
        if (last || !request.retry) throw error;
        await this.#pause(attempt);
        continue;
      }
      const waitMs = request.waitWhenTold ? toldToWaitMs(response) : undefined;
      if (waitMs !== undefined && waitMs <= this.#maxWaitMs && !last) {
        await response.body?.cancel();
        // At least as long as told, and a little more at random, so that tills told together do
        // not come back together.
        await sleep(Math.max(waitMs * (1 + Math.random() / 10), this.#backoffMs(attempt)));
        continue;
      }
      if (response.status >= 500 && waitMs === undefined && request.retry && !last) {
        await response.body?.cancel();
        await this.#pause(attempt);
        continue;
      }
      return readAnswer<T>(response);
    }
  }

  // Exponential, with jitter, so that tills that failed together do not retry together.
  #pause(attempt: number): Promise<void> {
    return sleep(this.#backoffMs(attempt));
  }

  #backoffMs(attempt: number): number {
    return this.#delayMs * 2 ** (attempt - 1) * (0.5 + Math.random() / 2);
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/**
 * How long an answer tells the client to wait before the same request, in ms: a 429 or a 503
 * with `Retry-After` in seconds (docs/api.md#rate-limits, #shards). Both mean the service did
 * nothing, so the request may go again whatever it is.
 */
function toldToWaitMs(response: Response): number | undefined {
  if (response.status !== 429 && response.status !== 503) return undefined;
  const seconds = Number(response.headers.get("retry-after") ?? Number.NaN);
  return Number.isFinite(seconds) && seconds >= 0 ? seconds * 1000 : undefined;
}

/** One call as the client sends it, before the token is added. */
interface Call {
  headers: Record<string, string>;
  body?: string;
  /** Whether a network failure or 5xx may be sent again. */
  retry: boolean;
  /** Whether a 429 or 503 with Retry-After is waited out and sent again. */
  waitWhenTold: boolean;
}

function withToken(request: Call, token: string): Call {
  return { ...request, headers: { Authorization: `Bearer ${token}`, ...request.headers } };
}

// Every refusal of the token names Authorization first (docs/api.md): expired, or not valid
// any more because its signing key was retired. Either way a fresh login is the cure.
function isTokenRefusal(error: unknown): boolean {
  return error instanceof ReceiptsError && error.status === 403 && error.message.startsWith("Header Authorization");
}

async function readAnswer<T>(response: Response): Promise<T> {
  const text = await response.text();
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    body = undefined;
  }
  if (response.ok && isObject(body) && body.status_code === 200) return body as T;
  const error = isObject(body) ? (body as Partial<ErrorResponse>) : {};
  const retryAfter = Number(response.headers.get("retry-after") ?? Number.NaN);
  throw new ReceiptsError(
    response.status,
    typeof error.status === "string" ? error.status : response.statusText,
    typeof error.message === "string" ? error.message : `The service answered ${response.status} without an error body.`,
    Number.isFinite(retryAfter) ? retryAfter : undefined,
  );
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null;
}

function checkedBaseUrl(value: unknown): string {
  let url: URL | undefined;
  try {
    url = typeof value === "string" ? new URL(value) : undefined;
  } catch {
    url = undefined;
  }
  if (!url || (url.protocol !== "https:" && url.protocol !== "http:") || url.search || url.hash) {
    throw new TypeError("ReceiptsClient: baseUrl must be an http(s) URL without query or fragment, such as https://receipts.example.com.");
  }
  return url.href.replace(/\/+$/, "");
}

function checkedHeader(name: string, value: unknown): string {
  if (!isHeaderText(value)) {
    throw new TypeError(`ReceiptsClient: ${name} must be 1–${MAX_HEADER_TEXT} printable ASCII characters, as the operator issued it.`);
  }
  return value;
}

function checkedCount(name: string, value: unknown, min: number): number {
  if (typeof value !== "number" || !Number.isInteger(value) || value < min) {
    throw new TypeError(`ReceiptsClient: ${name} must be an integer of at least ${min}.`);
  }
  return value;
}
