/**
 * The bench's push service: a local HTTP server in the bench's own process that the notifier
 * pushes to, answering 204 after `delayMs`. It counts distinct events, so a run knows when all
 * it sent have arrived, and notes when each receipt's event of each type first arrived, so a run
 * can time the way from the till's answer to the app.
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { LOOPBACK } from "../harness/miniflare.ts";

const DELIVERY_TIMEOUT_MS = 120_000;

/** A started receiver. */
export interface Receiver {
  server: Server;
  url: string;
  /** How long it waits before each answer. */
  delayMs: number;
  /** Resolves once `count` distinct events have arrived since the last call. */
  expect(count: number): Promise<void>;
  /** `performance.now()` at the first arrival of a receipt's event of a type (see {@link arrivalKey}). */
  arrivals: Map<string, number>;
}

/** How {@link Receiver.arrivals} names one receipt's event of one type. */
export function arrivalKey(type: string, receiptId: string): string {
  return `${type} ${receiptId}`;
}

/** Starts a receiver on a loopback port of its own. */
export async function startReceiver(): Promise<Receiver> {
  let seen = new Set<string>();
  let wanted = Number.POSITIVE_INFINITY;
  let done: () => void = () => undefined;
  const server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on("data", (chunk: Buffer) => chunks.push(chunk));
    request.on("end", () => {
      const at = performance.now();
      if (receiver.delayMs > 0) setTimeout(() => response.writeHead(204).end(), receiver.delayMs);
      else response.writeHead(204).end();
      const event = JSON.parse(Buffer.concat(chunks).toString("utf8")) as { event_id: string; type: string; receipt_id?: string };
      if (event.receipt_id !== undefined) {
        const key = arrivalKey(event.type, event.receipt_id);
        if (!receiver.arrivals.has(key)) receiver.arrivals.set(key, at);
      }
      seen.add(event.event_id);
      if (seen.size >= wanted) done();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, LOOPBACK, resolve));
  const { port } = server.address() as AddressInfo;
  const receiver: Receiver = {
    server,
    url: `http://${LOOPBACK}:${port}/push`,
    delayMs: 0,
    arrivals: new Map(),
    expect(count) {
      seen = new Set();
      wanted = count;
      return new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`${seen.size} of ${count} events delivered in time`)), DELIVERY_TIMEOUT_MS);
        done = () => {
          clearTimeout(timer);
          resolve();
        };
      });
    },
  };
  return receiver;
}
