/**
 * One push of an event to the app push service, signed the Standard Webhooks way
 * (docs/api.md#receipt-events), so the app side can verify it with any Standard Webhooks library. Kept alone so that a reviewer
 * audits the signing alone.
 */
import { describeError } from "../shared/log.ts";

/** What one push did: acknowledged, or why not and whether trying again can help. */
export type PushResult =
  | { ok: true; status: number }
  | { ok: false; retryable: boolean; error: string; retryAfterSeconds?: number; status?: number };

/**
 * POSTs `body` (the notice's JSON, byte for byte as stored) to `url` with the headers
 * `webhook-id`, `webhook-timestamp` and `webhook-signature`, giving up after `timeoutMs`
 * (PUSH_TIMEOUT_SECONDS). Each attempt is signed anew, since receivers refuse old timestamps.
 * Redirects are not followed: a signed notice goes only to the configured URL.
 */
export async function pushNotice(
  target: { url: string; keys: readonly CryptoKey[] },
  eventId: string,
  body: string,
  now: Date,
  timeoutMs: number,
): Promise<PushResult> {
  const timestamp = String(Math.floor(now.getTime() / 1000));
  const signature = await webhookSignature(target.keys, eventId, timestamp, body);
  // A timer of our own, cleared once the answer is in: AbortSignal.timeout's stays active for its
  // whole span after a push that answered at once, and a runtime holds at most 10,000 active
  // timers, which a played hour of pushes in one test's runtime reached.
  const deadline = new AbortController();
  const timer = setTimeout(() => deadline.abort(new DOMException("The push timed out", "TimeoutError")), timeoutMs);
  try {
    return await pushed(target.url, eventId, timestamp, signature, body, deadline.signal);
  } finally {
    clearTimeout(timer);
  }
}

async function pushed(url: string, eventId: string, timestamp: string, signature: string, body: string, signal: AbortSignal): Promise<PushResult> {
  let response: Response;
  try {
    response = await fetch(url, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        "webhook-id": eventId,
        "webhook-timestamp": timestamp,
        "webhook-signature": signature,
      },
      body,
      redirect: "manual",
      signal,
    });
  } catch (error) {
    return { ok: false, retryable: true, error: `network: ${describeError(error)}` };
  }
  await response.body?.cancel();
  const { status } = response;
  if (status >= 200 && status < 300) return { ok: true, status };
  // 408 and 429 say "later", a 5xx may pass; any other answer (a 3xx, 400, 401, 404, 410...)
  // will not change by itself and goes to the dead letters for an operator.
  const retryable = status === 408 || status === 429 || status >= 500;
  return {
    ok: false,
    retryable,
    error: `HTTP ${status} from the push service`,
    status,
    retryAfterSeconds: retryAfter(response.headers.get("retry-after")),
  };
}

/**
 * The `webhook-signature` value: `v1,<base64 HMAC-SHA256 of "id.timestamp.body">` per key,
 * separated by spaces.
 */
export async function webhookSignature(
  keys: readonly CryptoKey[],
  eventId: string,
  timestamp: string,
  body: string,
): Promise<string> {
  const content = new TextEncoder().encode(`${eventId}.${timestamp}.${body}`);
  const signatures = await Promise.all(
    keys.map(async (key) => `v1,${toBase64(new Uint8Array(await crypto.subtle.sign("HMAC", key, content)))}`),
  );
  return signatures.join(" ");
}

function toBase64(bytes: Uint8Array): string {
  return btoa(String.fromCharCode(...bytes));
}

// Only the delay-seconds form; an HTTP date is rare from push services and the backoff covers it.
function retryAfter(value: string | null): number | undefined {
  if (value === null || !/^\d{1,6}$/.test(value.trim())) return undefined;
  return Number(value.trim());
}
