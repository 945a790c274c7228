/**
 * The notifier's floor: a queue consumer doing only what any exactly-once consumer of the notices
 * must, as the routes' floors do their unavoidable storage calls and crypto. Per batch, one D1
 * round trip claims every message's event (a duplicate queue copy finds its claim taken and is
 * acked unpushed), then each claimed event is pushed signed as Standard Webhooks requires
 * (`webhook-id`, `webhook-timestamp`, `webhook-signature`: HMAC-SHA256 of "id.timestamp.body"),
 * six at a time, and one more round trip records the outcomes. No outbox, no receipt read, no
 * retry schedule, no log line. Events per second delivered by the notifier divided by this one's
 * say what its bookkeeping beyond that costs.
 *
 * Never deployed: bench/notifier.ts bundles it and runs it beside the notifier in one Miniflare,
 * and creates its table before the timing.
 */
interface FloorEnv {
  PUSH_URL: string;
  /** `whsec_<base64>`, as the notifier's APP_PUSH_SECRET. */
  PUSH_SECRET: string;
  FLOOR_DB: D1Database;
}

// A Worker holds at most six connections open at once: the notifier's bound, and the floor's.
const PUSH_CONCURRENCY = 6;

let signingKey: Promise<CryptoKey> | undefined;

export default {
  async queue(batch, env): Promise<void> {
    const key = (signingKey ??= importKey(env.PUSH_SECRET));
    const claims = await env.FLOOR_DB.batch(
      batch.messages.map((message) => env.FLOOR_DB.prepare(CLAIM).bind(eventIdOf(message))),
    );
    // A copy whose event another delivery claimed is acked unpushed: exactly once.
    const toPush = batch.messages.filter((_, i) => claims[i]!.results.length > 0);
    const outcomes: { eventId: string; state: "delivered" | "failed" }[] = [];
    const push = async (): Promise<void> => {
      for (let message = toPush.shift(); message; message = toPush.shift()) {
        const eventId = eventIdOf(message);
        const body = JSON.stringify(message.body);
        const timestamp = String(Math.floor(Date.now() / 1000));
        const mac = await crypto.subtle.sign("HMAC", await key, new TextEncoder().encode(`${eventId}.${timestamp}.${body}`));
        const response = await fetch(env.PUSH_URL, {
          method: "POST",
          headers: {
            "content-type": "application/json",
            "webhook-id": eventId,
            "webhook-timestamp": timestamp,
            "webhook-signature": `v1,${btoa(String.fromCharCode(...new Uint8Array(mac)))}`,
          },
          body,
        });
        await response.body?.cancel();
        outcomes.push({ eventId, state: response.ok ? "delivered" : "failed" });
      }
    };
    await Promise.all(Array.from({ length: PUSH_CONCURRENCY }, push));
    if (outcomes.length > 0) {
      await env.FLOOR_DB.batch(outcomes.map(({ eventId, state }) => env.FLOOR_DB.prepare(RECORD).bind(state, eventId)));
    }
    batch.ackAll();
  },
} satisfies ExportedHandler<FloorEnv>;

// The table (floor_claims: event_id, state) is created by bench/notifier.ts before the timing.
const CLAIM = "INSERT INTO floor_claims (event_id, state) VALUES (?, 'claimed') ON CONFLICT DO NOTHING RETURNING event_id";
const RECORD = "UPDATE floor_claims SET state = ? WHERE event_id = ?";

function eventIdOf(message: Message): string {
  return (message.body as { event_id: string }).event_id;
}

function importKey(secret: string): Promise<CryptoKey> {
  const raw = Uint8Array.from(atob(secret.replace(/^whsec_/, "")), (c) => c.charCodeAt(0));
  return crypto.subtle.importKey("raw", raw, { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
}
