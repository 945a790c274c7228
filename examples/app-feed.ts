/**
 * The app side's catch-up through the event feed (docs/api.md#event-feed): log in as the app
 * push service's client (scope service.app), read every event after the last one applied, page by
 * page, and apply each once, as a push would be. The last event_id applied from the feed is kept
 * in a small file, so that a receiver restarted after missing events reads on from there.
 *
 *     const caughtUp = await catchUp({ baseUrl, clientId, clientSecret, cursorFile }, (event) => view.receive(event.event_id, event));
 */
import { readFileSync, renameSync, writeFileSync } from "node:fs";

/** Where the service is, and the app push service's client's credentials. */
export interface AppClient {
  baseUrl: string;
  clientId: string;
  clientSecret: string;
}

/** The app client, and where the feed's cursor is kept. */
export interface FeedSource extends AppClient {
  cursorFile: string;
}

/** An event as the feed and the push carry it; its `event_id` is the push's `webhook-id`. */
export interface FeedEvent {
  event_id: string;
  type: string;
  [field: string]: unknown;
}

/**
 * Applies every event after the cursor (from the feed's window start when there is no cursor
 * file), and moves the cursor on after each page: a stop halfway reads that page again, which
 * applying by event_id makes harmless. Returns how many events it read and the cursor it left.
 *
 * Only the feed moves the cursor: a push may arrive ahead of an earlier event still being
 * retried, and a cursor moved past that one would skip it on the next start. A cursor the feed no
 * longer knows (an erasure took its event, or it aged out of the window) is refused with 406, and
 * the catch-up starts again from the window start, as the refusal says.
 */
export async function catchUp(source: FeedSource, apply: (event: FeedEvent) => void): Promise<{ events: number; cursor: string | null }> {
  const token = await login(source);
  let cursor = readCursor(source.cursorFile);
  let events = 0;
  for (;;) {
    const query = new URLSearchParams({ limit: "100", ...(cursor !== null && { after: cursor }) });
    const response = await fetch(`${source.baseUrl}/receipts/v2/events?${query}`, {
      headers: { Authorization: `Bearer ${token}`, client_id: source.clientId },
    });
    const body = (await response.json()) as { data?: { events: FeedEvent[]; next: string | null }; message?: string };
    if (response.status === 406 && cursor !== null) {
      cursor = null;
      continue;
    }
    if (!response.ok || !body.data) throw new Error(`event feed answered ${response.status}: ${body.message ?? "no data"}`);
    if (body.data.next === null) return { events, cursor };
    for (const event of body.data.events) apply(event);
    events += body.data.events.length;
    cursor = body.data.next;
    writeCursor(source.cursorFile, cursor);
  }
}

/** Logs in as the app push service's client; returns its access token. */
export async function login(source: AppClient): Promise<string> {
  const response = await fetch(`${source.baseUrl}/receipts/v2/login`, {
    method: "POST",
    headers: { client_id: source.clientId, client_secret: source.clientSecret, token_type: "Bearer", scope: "service.app" },
  });
  const body = (await response.json()) as { data?: { access_token: string }; message?: string };
  if (!response.ok || !body.data) throw new Error(`login as the app client answered ${response.status}: ${body.message ?? "no token"}`);
  return body.data.access_token;
}

function readCursor(file: string): string | null {
  try {
    return readFileSync(file, "utf8").trim() || null;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return null;
    throw error;
  }
}

// Written aside and renamed over: a stop mid-write leaves the old cursor, never half of one.
function writeCursor(file: string, cursor: string): void {
  writeFileSync(`${file}.tmp`, `${cursor}\n`);
  renameSync(`${file}.tmp`, file);
}
