/** GET /receipts/v2/events: the event feed of the app push service (docs/api.md#event-feed). */
import { feedQuery } from "../../shared/schemas.ts";
import { tagOfId } from "../../shared/shard-ids.ts";
import { readFeed } from "../../storage/outbox/operations.ts";
import { shardsOf } from "../../storage/shards.ts";
import type { RouteContext } from "../context.ts";
import { REFUSALS, refuse } from "../refusals.ts";
import { jsonTextResponse } from "../responses.ts";

/** How many events a page holds when the caller does not say. */
const DEFAULT_LIMIT = 100;

/**
 * A page of the events pushed to the app push service, in event_id order across every shard,
 * within the last EVENT_FEED_DAYS but its newest FEED_SETTLE_SECONDS: checks run headers, token
 * and client, then the query.
 */
export async function feed(c: RouteContext<"events">): Promise<Response> {
  const { after, limit } = readQuery(c);
  const { eventFeedMs, feedSettleMs } = c.get("config");
  const now = Date.now();
  const windowStart = idTimePrefix(now - eventFeedMs);
  // One cut for every shard: an event made before it committed before any shard is read, as
  // each commits within EVENT_COMMIT_SECONDS of its event_id's time (docs/api.md "The tail").
  const settledBefore = idTimePrefix(now - feedSettleMs);
  const shards = shardsOf(c.env);
  const shardTag = after === undefined ? undefined : tagOfId(after);
  // An event_id sorts by its time first: one before the window's first possible ID is older than the window.
  if (after !== undefined && (after < windowStart || !shards.some((shard) => shard.tag === shardTag))) {
    throw refuse(REFUSALS.feedAfter, "after outside the window or of no shard");
  }
  const page = await readFeed(
    shards,
    after === undefined ? { from: windowStart } : { after: { eventId: after, shardTag: shardTag! } },
    settledBefore,
    limit,
  );
  if (!page.found) throw refuse(REFUSALS.feedAfter, "after not in the outbox");
  // The events are stored JSON text, and a created event's receipt the bytes add stored: spliced, never re-encoded.
  const body = `{"data":{"events":[${page.events.join(",")}],"next":${JSON.stringify(page.next)}},"status":"OK","status_code":200}`;
  return jsonTextResponse(body, 200);
}

// A parameter sent twice is as unusable as a malformed one: which one was meant is unknown.
function readQuery(c: RouteContext<"events">): { after: string | undefined; limit: number } {
  const values: Record<string, string> = {};
  for (const name of ["after", "limit"] as const) {
    const sent = c.req.queries(name) ?? [];
    if (sent.length > 1) throw refuse(name === "after" ? REFUSALS.feedAfter : REFUSALS.feedLimit, `${name} sent twice`);
    if (sent.length === 1) values[name] = sent[0]!;
  }
  const parsed = feedQuery.safeParse(values);
  if (!parsed.success) {
    const name = String(parsed.error.issues[0]!.path[0]);
    throw refuse(name === "after" ? REFUSALS.feedAfter : REFUSALS.feedLimit, `${name} malformed`);
  }
  return { after: parsed.data.after, limit: parsed.data.limit === undefined ? DEFAULT_LIMIT : Number(parsed.data.limit) };
}

// The first 48 bits of a UUIDv7 are its Unix time in milliseconds: as text, the smallest prefix
// of every event_id made at or after `ms`, so "event_id >= prefix" is "made at or after ms".
function idTimePrefix(ms: number): string {
  const hex = Math.max(0, Math.floor(ms)).toString(16).padStart(12, "0");
  return `${hex.slice(0, 8)}-${hex.slice(8)}`;
}
