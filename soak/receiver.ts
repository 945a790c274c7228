/**
 * The soak's app push service: a local HTTP server that verifies every delivery's Standard
 * Webhooks signature with the reference library (as examples/app-receiver.ts does), records every
 * delivery, and answers some of them badly on purpose: 500, 429 with Retry-After, slowly (within
 * or beyond the notifier's push timeout), or by dropping the connection; during an outage it
 * answers 500 to everything, and while it refuses, 401. For a restart, it holds one push unanswered, so that the runtime
 * stops while the notifier is mid-batch.
 */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { setTimeout as sleep } from "node:timers/promises";
import { Webhook, WebhookVerificationError } from "standardwebhooks";
import { LOOPBACK } from "../harness/miniflare.ts";
import type { Prng } from "./prng.ts";

/** What the receiver did with one delivery attempt. */
export type DeliveryOutcome =
  /** Verified and taken in: the app applied it (unless it had seen its webhook-id). */
  | "applied"
  | "bad signature"
  /** Held unanswered until the runtime was restarted under it. */
  | "held for a restart"
  | PushFault;

/** The ways the receiver answers badly on purpose. */
export type PushFault = "push 500" | "push 429" | "push slow" | "push timeout" | "push dropped" | "push outage" | "push refused";

/** One delivery attempt as the receiver saw it. */
export interface Delivery {
  /** When it arrived, in ms since the epoch. */
  at: number;
  webhookId: string;
  outcome: DeliveryOutcome;
  /** The event, for an applied delivery. */
  event?: { type: string; receipt_id: string; occurred_at: string; event_id: string; app_user_id: string };
  /**
   * A created event's receipt as the till sent it, byte for byte: its `receipt` text, or for one
   * added in DR Retail its `original` text.
   */
  receiptText?: string;
  /** Of a receipt added in DR Retail: its format, and its model's number, total and sum of line totals. */
  drModel?: { format: string; marker?: string; total: number; linesTotal: number };
}

export interface PushReceiver {
  url: string;
  readonly deliveries: readonly Delivery[];
  /** Share of deliveries answered badly (0 heals the receiver). */
  setFaultRate(rate: number): void;
  setOutage(on: boolean): void;
  /** Answers 401 to every push, as when the two sides' signing secrets differ: no retry helps. */
  setRefusing(on: boolean): void;
  /** Resolves once a push has been refused with 401 at or after `since` (ms since the epoch). */
  refusedSince(since: number): Promise<void>;
  /**
   * Holds the next push unanswered, until the connection closes (the runtime that sent it
   * stopped); resolves true once it holds one, false if none came within `timeoutMs`.
   */
  holdNextPush(timeoutMs: number): Promise<boolean>;
  close(): Promise<void>;
}

/** The faults among deliveries answered badly, each as likely as its weight. */
const FAULT_WEIGHTS: Record<Exclude<PushFault, "push outage" | "push refused">, number> = {
  "push 500": 3,
  "push 429": 2,
  "push slow": 1,
  "push timeout": 1,
  "push dropped": 3,
};

const REFUSAL_STATUS = { "push 500": 500, "push outage": 500, "push 429": 429, "push refused": 401 } as const;

/**
 * Starts the receiver on loopback. `pushTimeoutMs` is the notifier's: a slow answer stays within
 * it, a timeout goes beyond it (the app applied the event, the notifier does not know, and pushes
 * it again: a duplicate the app must recognise by webhook-id).
 */
export async function startPushReceiver(options: { secret: string; prng: Prng; pushTimeoutMs: number }): Promise<PushReceiver> {
  const webhook = new Webhook(options.secret);
  const { prng, pushTimeoutMs } = options;
  const deliveries: Delivery[] = [];
  let faultRate = 0;
  let outage = false;
  let refusing = false;
  let hold: (() => void) | undefined;
  const refusalWaiters = new Set<{ since: number; resolve: () => void }>();

  const handle = async (request: IncomingMessage, response: ServerResponse): Promise<void> => {
    const webhookId = headerValue(request, "webhook-id");
    const at = Date.now();
    if (hold) {
      deliveries.push({ at, webhookId, outcome: "held for a restart" });
      hold();
      hold = undefined;
      await new Promise((resolve) => request.socket.once("close", resolve));
      return;
    }
    const fault: PushFault | undefined = refusing
      ? "push refused"
      : outage
        ? "push outage"
        : prng.chance(faultRate)
          ? prng.weighted(FAULT_WEIGHTS)
          : undefined;
    if (fault === "push dropped") {
      deliveries.push({ at, webhookId, outcome: fault });
      request.socket.destroy();
      return;
    }
    const body = await readBody(request);
    if (fault === "push 500" || fault === "push outage" || fault === "push 429" || fault === "push refused") {
      deliveries.push({ at, webhookId, outcome: fault });
      if (fault === "push refused") {
        for (const waiter of refusalWaiters) {
          if (waiter.since <= at) {
            refusalWaiters.delete(waiter);
            waiter.resolve();
          }
        }
      }
      const retryAfter = fault === "push 429" ? { "retry-after": String(prng.int(1, 3)) } : undefined;
      response.writeHead(REFUSAL_STATUS[fault], retryAfter).end();
      return;
    }
    let event: Delivery["event"];
    try {
      event = webhook.verify(body, {
        "webhook-id": webhookId,
        "webhook-timestamp": headerValue(request, "webhook-timestamp"),
        "webhook-signature": headerValue(request, "webhook-signature"),
      }) as Delivery["event"];
    } catch (error) {
      if (!(error instanceof WebhookVerificationError)) throw error;
      deliveries.push({ at, webhookId, outcome: "bad signature" });
      response.writeHead(401).end();
      return;
    }
    deliveries.push({ at, webhookId, outcome: "applied", event, ...receiptOf(body, event as PushedReceipt) });
    // Applied first, answered late: as an app that commits, then is slow to answer.
    if (fault) {
      deliveries.push({ at, webhookId, outcome: fault });
      await sleep(fault === "push slow" ? prng.between(0.2, 0.6) * pushTimeoutMs : prng.between(1.2, 1.6) * pushTimeoutMs);
    }
    if (!response.destroyed) response.writeHead(204).end();
  };

  const server = createServer((request, response) => {
    handle(request, response).catch(() => {
      if (!response.headersSent) response.writeHead(500).end();
    });
  });
  // A notifier cut off mid-push (a timeout, a restart) resets its connection; nothing to report.
  server.on("clientError", (_error, socket) => socket.destroy());
  await new Promise<void>((resolve) => server.listen(0, LOOPBACK, resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://${LOOPBACK}:${port}/push`,
    deliveries,
    setFaultRate: (rate) => {
      faultRate = rate;
    },
    setOutage: (on) => {
      outage = on;
    },
    setRefusing: (on) => {
      refusing = on;
    },
    refusedSince: (since) =>
      deliveries.some((delivery) => delivery.outcome === "push refused" && delivery.at >= since)
        ? Promise.resolve()
        : new Promise((resolve) => refusalWaiters.add({ since, resolve })),
    holdNextPush: (timeoutMs) =>
      new Promise((resolve) => {
        const timer = setTimeout(() => {
          hold = undefined;
          resolve(false);
        }, timeoutMs);
        hold = () => {
          clearTimeout(timer);
          resolve(true);
        };
      }),
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

// The notifier splices the stored body in as the last field, byte for byte (src/notifier/deliver.ts):
// `receipt`, or for a receipt added in DR Retail `original` after the model and its format.
const RECEIPT_FIELD = ',"receipt":';
const ORIGINAL_FIELD = ',"original":';

interface PushedReceipt {
  format?: string;
  receipt?: { total: number; pos_receipt_number?: string; line_items: { total: number }[] };
}

function receiptOf(body: string, event: PushedReceipt): Pick<Delivery, "receiptText" | "drModel"> {
  const field = event.format === undefined ? RECEIPT_FIELD : ORIGINAL_FIELD;
  const start = body.indexOf(field);
  if (start < 0) return {};
  const receiptText = body.slice(start + field.length, -1);
  if (event.format === undefined || !event.receipt) return { receiptText };
  const { total, pos_receipt_number: marker, line_items } = event.receipt;
  const linesTotal = line_items.reduce((sum, line) => sum + line.total, 0);
  return { receiptText, drModel: { format: event.format, ...(marker !== undefined && { marker }), total, linesTotal } };
}

function headerValue(request: IncomingMessage, name: string): string {
  const value = request.headers[name];
  return typeof value === "string" ? value : "";
}

async function readBody(request: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of request as AsyncIterable<Buffer>) chunks.push(chunk);
  return Buffer.concat(chunks).toString("utf8");
}
