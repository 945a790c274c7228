/**
 * The outbox's life of an event (src/storage/outbox/), operation by operation against one
 * shard's real local D1: recorded → enqueued → claimed → delivered or failed → purged or
 * replayed, and the order rule that holds a receipt's deleted event behind its created event.
 */
import { v7 as uuidv7 } from "uuid";
import { describe, expect, it } from "vitest";
import type { AppUserErasedEvent } from "../../../src/shared/schemas.ts";
import type { CreationNotice, DeletionNotice } from "../../../src/shared/types.ts";
import {
  claimEvents,
  deadLetter,
  markEndpointDown,
  markEndpointUp,
  markEnqueued,
  pendingEvents,
  purgeDelivered,
  settleEvents,
} from "../../../src/storage/outbox/operations.ts";
import {
  eraseEventsOfReceipts,
  recordDeletedIfOwned,
  recordErasedEvent,
  REPLAY_PAGE,
  replayFailed,
  stateOfRow,
  type EventState,
} from "../../../src/storage/outbox/statements.ts";
import { EVENT_COMMIT_SECONDS } from "../../../src/shared/config.ts";
import { deleteOwnedReceipt, storeReceipt } from "../../../src/storage/receipts.ts";
import { idOnShard } from "../../../src/storage/shards.ts";
import { bound, runBatch, statement } from "../../../src/storage/statement.ts";
import { uniqueId } from "../../support/api.ts";
import { forgetPushEndpoint } from "../../support/notices.ts";
import { SHARDS, idOn } from "../../support/shards.ts";


const shard = SHARDS[0]!;
const db = shard.db;
const LEASE_MS = 60_000;
const SECOND = 1000;
const MINUTE = 60 * SECOND;
/** The retry window, 72 hours deployed. */
const WINDOW_MS = 72 * 3_600 * SECOND;

/** Where an event is in its life at `now`, read from the two tables. */
async function stateOf(eventId: string, now: Date): Promise<EventState> {
  const row = await db
    .prepare("SELECT enqueued_at, claimed_until, delivered_at FROM notice_outbox WHERE event_id = ?1")
    .bind(eventId)
    .first<{ enqueued_at: string | null; claimed_until: string | null; delivered_at: string | null }>();
  if (row) return stateOfRow(row, now);
  const failed = await db.prepare("SELECT 1 FROM failed_notices WHERE event_id = ?1").bind(eventId).first();
  return failed ? "failed" : "purged";
}

/** An erasure's event: recorded with no receipt behind it. */
async function recordedEvent(at: Date): Promise<AppUserErasedEvent> {
  const event: AppUserErasedEvent = {
    event_id: idOn(shard),
    type: "app_user.erased",
    occurred_at: at.toISOString(),
    app_user_id: uniqueId("au"),
    receipts: 0,
  };
  await bound(db, recordErasedEvent(event, "1")).run();
  return event;
}

// An ID on the shard made at `at`, as the Workers make them: a receipt_id and its created event's
// event_id at the receipt's created_at, a deleted event's at its deletion.
function idAt(at: Date): string {
  return idOnShard(uuidv7({ msecs: at.getTime() }), shard);
}

/** A receipt row on the shard, and its created and deleted events (not recorded yet). */
// A receipt stored as add stores it, with its created event recorded, and its deleted event to come.
async function storedReceiptEvents(at: Date): Promise<{ created: CreationNotice; deleted: DeletionNotice }> {
  const owner = { receipt_id: idAt(at), chain_id: "chain-1", client_id: "pos-1", app_user_id: uniqueId("au") };
  const created: CreationNotice = { ...owner, event_id: idAt(at), type: "receipt.created", occurred_at: at.toISOString(), created_at: at.toISOString() };
  const stored = await storeReceipt(shard, { ...owner, body: '{"total":1}', created_at: at.toISOString(), user_key: uniqueId("key") }, created);
  expect(stored.kind).toBe("added");
  const deletedAt = new Date(at.getTime() + SECOND);
  const deleted: DeletionNotice = { ...owner, event_id: idAt(deletedAt), type: "receipt.deleted", occurred_at: deletedAt.toISOString() };
  return { created, deleted };
}

/**
 * An erasure's event recorded at `t0`, claimed and failed then (503): its window of `WINDOW_MS`
 * open from `t0`, its next attempt due 10 seconds later.
 */
async function failedOnce(t0: Date): Promise<{ event: AppUserErasedEvent; schedule: { nextAttemptAt: Date; retryUntil: Date; lateMs: number } }> {
  const event = await recordedEvent(t0);
  await claimEvents(db, [event.event_id], t0, LEASE_MS);
  const schedule = { nextAttemptAt: new Date(t0.getTime() + 10 * SECOND), retryUntil: new Date(t0.getTime() + WINDOW_MS), lateMs: 0 };
  await settleEvents(db, { delivered: [], failed: [{ eventId: event.event_id, error: "HTTP 503 from the push service", schedule }] }, t0);
  return { event, schedule };
}

describe("outbox: an event's life from its record to its delivery and purge", () => {
  it("recorded → enqueued → claimed → (failed attempt) → claimed again → delivered → purged", async () => {
    const t0 = new Date();
    const event = await recordedEvent(t0);
    expect(await stateOf(event.event_id, t0)).toBe("recorded");

    const pending = await pendingEvents(db, { unsentBefore: new Date(t0.getTime() + SECOND), lostBefore: t0, upSince: null, limit: 1000 }, t0);
    expect(pending).toContainEqual({ event_id: event.event_id, payload: JSON.stringify(event) });
    await markEnqueued(db, [event.event_id], t0);
    expect(await stateOf(event.event_id, t0)).toBe("enqueued");
    const notYetLost = await pendingEvents(db, { unsentBefore: new Date(t0.getTime() + SECOND), lostBefore: new Date(t0.getTime() - 1), upSince: null, limit: 1000 }, t0);
    expect(notYetLost.map(({ event_id }) => event_id)).not.toContain(event.event_id);

    const [first] = await claimEvents(db, [event.event_id], t0, LEASE_MS);
    expect(first).toEqual({ status: "claimed", payload: JSON.stringify(event), attempts: 1, retryUntil: null, pausedMs: 0, lateMs: 0, body: null, endpointDown: false });
    expect(await stateOf(event.event_id, t0)).toBe("claimed");
    // A second delivery of the same event waits until the claim runs out.
    expect(await claimEvents(db, [event.event_id], t0, LEASE_MS)).toEqual([{ status: "held", until: new Date(t0.getTime() + LEASE_MS) }]);

    const retry = { nextAttemptAt: t0, retryUntil: new Date(t0.getTime() + LEASE_MS), lateMs: 0 };
    await settleEvents(db, { delivered: [], failed: [{ eventId: event.event_id, error: "HTTP 503 from the push service", schedule: retry }] }, t0);
    expect(await stateOf(event.event_id, t0)).toBe("enqueued");
    const [second] = await claimEvents(db, [event.event_id], t0, LEASE_MS);
    expect(second).toMatchObject({ status: "claimed", attempts: 2 });

    const t1 = new Date(t0.getTime() + SECOND);
    await settleEvents(db, { delivered: [event.event_id], failed: [] }, t1);
    expect(await stateOf(event.event_id, t1)).toBe("delivered");
    expect(await claimEvents(db, [event.event_id], t1, LEASE_MS)).toEqual([{ status: "delivered" }]);
    expect(await deadLetter(db, event.event_id, t1, WINDOW_MS)).toBe("gone");
    expect(await stateOf(event.event_id, t1)).toBe("delivered");

    await purgeDelivered(db, new Date(t1.getTime() - 1), 1000);
    expect(await stateOf(event.event_id, t1)).toBe("delivered");
    expect(await purgeDelivered(db, t1, 1000)).toBeGreaterThanOrEqual(1);
    expect(await stateOf(event.event_id, t1)).toBe("purged");
    expect(await claimEvents(db, [event.event_id], t1, LEASE_MS)).toEqual([{ status: "gone" }]);
  });

  it("a claim that ran out is taken over by the next delivery", async () => {
    const t0 = new Date();
    const event = await recordedEvent(t0);
    await claimEvents(db, [event.event_id], t0, LEASE_MS);
    const later = new Date(t0.getTime() + LEASE_MS);
    // The claim marked its copy's arrival: the cron job leaves it to the queue's retries.
    expect(await stateOf(event.event_id, later)).toBe("enqueued");
    expect(await claimEvents(db, [event.event_id], later, LEASE_MS)).toMatchObject([{ status: "claimed", attempts: 2 }]);
  });

  it("a sent event no delivery claimed is handed over again after the grace; a claimed one only once it counts as lost", async () => {
    const t0 = new Date();
    const unclaimed = await recordedEvent(t0);
    const claimed = await recordedEvent(t0);
    // Its delivery stopped before it recorded anything: the claim runs out by itself.
    await claimEvents(db, [claimed.event_id], t0, LEASE_MS);
    const later = new Date(t0.getTime() + LEASE_MS);

    const afterGrace = { unsentBefore: new Date(t0.getTime() + SECOND), lostBefore: new Date(t0.getTime() - 1), upSince: null, limit: 1000 };
    const resent = (await pendingEvents(db, afterGrace, later)).map(({ event_id }) => event_id);
    expect(resent).toContain(unclaimed.event_id);
    expect(resent).not.toContain(claimed.event_id);
    const lost = (await pendingEvents(db, { ...afterGrace, lostBefore: t0 }, later)).map(({ event_id }) => event_id);
    expect(lost).toContain(claimed.event_id);
  });

  it("a failed attempt that dead-letters the event keeps its claim until the dead letter is stored: no other delivery takes it meanwhile", async () => {
    const t0 = new Date();
    const event = await recordedEvent(t0);
    await claimEvents(db, [event.event_id], t0, LEASE_MS);
    await settleEvents(db, { delivered: [], failed: [{ eventId: event.event_id, error: "HTTP 401 from the push service", schedule: null }] }, t0);
    expect(await claimEvents(db, [event.event_id], t0, LEASE_MS)).toEqual([{ status: "held", until: new Date(t0.getTime() + LEASE_MS) }]);
    expect(await deadLetter(db, event.event_id, t0, WINDOW_MS)).toBe("failed");
    expect(await stateOf(event.event_id, t0)).toBe("failed");
    expect(await claimEvents(db, [event.event_id], t0, LEASE_MS)).toEqual([{ status: "gone" }]);
  });

  it("two copies of one event in one batch: the first is claimed, the second finds it held", async () => {
    const t0 = new Date();
    const event = await recordedEvent(t0);
    const claims = await claimEvents(db, [event.event_id, event.event_id], t0, LEASE_MS);
    expect(claims.map(({ status }) => status)).toEqual(["claimed", "held"]);
  });
});

describe("outbox: the retry schedule kept in the event's row", () => {
  const since = (t0: Date) => ({ unsentBefore: new Date(t0.getTime() - SECOND), lostBefore: new Date(t0.getTime() - HOUR), upSince: null, limit: 1000 });
  const HOUR = 3_600 * SECOND;

  it("a failed attempt is handed over again once its next attempt is due, not before; the re-send clears it", async () => {
    const t0 = new Date();
    const event = await recordedEvent(t0);
    const [claim] = await claimEvents(db, [event.event_id], t0, LEASE_MS);
    expect(claim).toMatchObject({ status: "claimed", retryUntil: null });
    const schedule = { nextAttemptAt: new Date(t0.getTime() + 10 * SECOND), retryUntil: new Date(t0.getTime() + 72 * HOUR), lateMs: 0 };
    await settleEvents(db, { delivered: [], failed: [{ eventId: event.event_id, error: "HTTP 503 from the push service", schedule }] }, t0);
    const pendingAt = async (now: Date) => (await pendingEvents(db, since(now), now)).map(({ event_id }) => event_id);
    expect(await pendingAt(new Date(t0.getTime() + 9 * SECOND))).not.toContain(event.event_id);
    const due = new Date(t0.getTime() + 10 * SECOND);
    expect(await pendingAt(due)).toContain(event.event_id);
    await markEnqueued(db, [event.event_id], due);
    expect(await pendingAt(new Date(due.getTime() + SECOND))).not.toContain(event.event_id);
    // The window, set at the first failure, comes back with the next claim.
    expect(await claimEvents(db, [event.event_id], due, LEASE_MS)).toMatchObject([{ status: "claimed", attempts: 2, retryUntil: schedule.retryUntil }]);
  });

  it("once the push service is back, every event waiting since before it is handed over at once, whatever its schedule", async () => {
    const t0 = new Date();
    const event = await recordedEvent(t0);
    await claimEvents(db, [event.event_id], t0, LEASE_MS);
    const schedule = { nextAttemptAt: new Date(t0.getTime() + HOUR), retryUntil: new Date(t0.getTime() + 72 * HOUR), lateMs: 0 };
    await settleEvents(db, { delivered: [], failed: [{ eventId: event.event_id, error: "HTTP 503 from the push service", schedule }] }, t0);
    const now = new Date(t0.getTime() + 5 * SECOND);
    expect((await pendingEvents(db, since(now), now)).map(({ event_id }) => event_id)).not.toContain(event.event_id);
    const back = { ...since(now), upSince: new Date(t0.getTime() + SECOND) };
    expect((await pendingEvents(db, back, now)).map(({ event_id }) => event_id)).toContain(event.event_id);
  });

  it("the claim of an attempt made late counts the time since it was due, the push service's down time meanwhile not twice; the failure keeps it, and the dead letters count it", async () => {
    const t0 = new Date();
    const {
      event,
      schedule: { nextAttemptAt: due, retryUntil },
    } = await failedOnce(t0);
    try {
      // Down for 2 minutes after it was due; the cron hands it over on time, which clears
      // next_attempt_at, and the notifier claims it 5 minutes late.
      await markEndpointDown([db], new Date(due.getTime() + MINUTE), SECOND);
      await markEndpointUp([db], new Date(due.getTime() + 3 * MINUTE));
      await markEnqueued(db, [event.event_id], due);
      const claimedAt = new Date(due.getTime() + 5 * MINUTE);
      const [claim] = await claimEvents(db, [event.event_id], claimedAt, LEASE_MS);
      expect(claim).toMatchObject({ status: "claimed", attempts: 2, retryUntil, pausedMs: 2 * MINUTE, lateMs: 3 * MINUTE });
      // Its window ends 5 minutes later, and its next attempt falls there.
      const windowEnd = new Date(retryUntil.getTime() + 5 * MINUTE);
      const schedule = { nextAttemptAt: windowEnd, retryUntil, lateMs: 3 * MINUTE };
      await settleEvents(db, { delivered: [], failed: [{ eventId: event.event_id, error: "HTTP 503 from the push service", schedule }] }, claimedAt);
      // Kept: an early copy, or one on time, adds nothing to it.
      expect(await claimEvents(db, [event.event_id], windowEnd, LEASE_MS)).toMatchObject([{ status: "claimed", pausedMs: 2 * MINUTE, lateMs: 3 * MINUTE }]);
      expect(await deadLetter(db, event.event_id, new Date(windowEnd.getTime() - 1), WINDOW_MS)).toBe("scheduled");
      expect(await deadLetter(db, event.event_id, windowEnd, WINDOW_MS)).toBe("failed");
    } finally {
      await forgetPushEndpoint();
    }
  });

  it("an attempt overdue keeps its event from the dead letters, at most a window more: lateness does not keep it for ever", async () => {
    const t0 = new Date();
    const { event } = await failedOnce(t0);
    // Its window's end came and went with its attempt not yet made: a copy that met the queue's
    // retries meanwhile is no dead letter, until its window ran a second time over.
    expect(await deadLetter(db, event.event_id, new Date(t0.getTime() + WINDOW_MS + HOUR), WINDOW_MS)).toBe("scheduled");
    expect(await deadLetter(db, event.event_id, new Date(t0.getTime() + 2 * WINDOW_MS - 1), WINDOW_MS)).toBe("scheduled");
    expect(await deadLetter(db, event.event_id, new Date(t0.getTime() + 2 * WINDOW_MS), WINDOW_MS)).toBe("failed");
  });
});

describe("outbox: dead letters and their replay", () => {
  it("a dead letter of an event within its retry window moves nothing: the event stays to its schedule, and is handed over when due", async () => {
    const t0 = new Date();
    const { event, schedule } = await failedOnce(t0);
    // The queue dead-letters a copy that met its retries for reasons of its own, seconds later.
    const later = new Date(t0.getTime() + 5 * SECOND);
    expect(await deadLetter(db, event.event_id, later, WINDOW_MS)).toBe("scheduled");
    expect(await stateOf(event.event_id, later)).toBe("enqueued");
    const due = new Date(t0.getTime() + 10 * SECOND);
    const since = { unsentBefore: due, lostBefore: t0, upSince: null, limit: 1000 };
    expect((await pendingEvents(db, since, due)).map(({ event_id }) => event_id)).toContain(event.event_id);
    // Made on time and failed again, its last attempt due on its window's end: once that is over,
    // with no attempt overdue, a dead letter of it is one.
    await claimEvents(db, [event.event_id], due, LEASE_MS);
    const last = { ...schedule, nextAttemptAt: schedule.retryUntil };
    await settleEvents(db, { delivered: [], failed: [{ eventId: event.event_id, error: "HTTP 503 from the push service", schedule: last }] }, due);
    expect(await deadLetter(db, event.event_id, schedule.retryUntil, WINDOW_MS)).toBe("failed");
  });

  it("a dead letter of an event no push of which failed yet, within its window since it was made, moves nothing", async () => {
    const t0 = new Date();
    const event = await recordedEvent(t0);
    await claimEvents(db, [event.event_id], t0, LEASE_MS);
    expect(await deadLetter(db, event.event_id, new Date(t0.getTime() + WINDOW_MS - SECOND), WINDOW_MS)).toBe("scheduled");
    expect(await stateOf(event.event_id, t0)).toBe("claimed");
  });

  it("failed keeps the attempts and last error; a second dead letter moves nothing; replay brings it back as recorded", async () => {
    const t0 = new Date();
    const event = await recordedEvent(t0);
    await markEnqueued(db, [event.event_id], t0);
    await claimEvents(db, [event.event_id], t0, LEASE_MS);
    await settleEvents(db, { delivered: [], failed: [{ eventId: event.event_id, error: "HTTP 410 from the push service", schedule: null }] }, t0);

    expect(await deadLetter(db, event.event_id, t0, WINDOW_MS)).toBe("failed");
    expect(await stateOf(event.event_id, t0)).toBe("failed");
    const failed = await db.prepare("SELECT attempts, last_error, failed_at FROM failed_notices WHERE event_id = ?1").bind(event.event_id).first();
    expect(failed).toEqual({ attempts: 1, last_error: "HTTP 410 from the push service", failed_at: t0.toISOString() });
    expect(await deadLetter(db, event.event_id, t0, WINDOW_MS)).toBe("gone");
    expect(await claimEvents(db, [event.event_id], t0, LEASE_MS)).toEqual([{ status: "gone" }]);

    const [, removed] = await runBatch(db, replayFailed([event.event_id]));
    expect(removed!.results).toEqual([{ event_id: event.event_id, receipt_id: event.event_id }]);
    expect(await stateOf(event.event_id, t0)).toBe("recorded");
    expect(await claimEvents(db, [event.event_id], t0, LEASE_MS)).toMatchObject([{ status: "claimed", attempts: 1, retryUntil: null }]);
  });

  it("docs/api.md#limits a replay without event ids moves back the oldest 1,000 failed events of the shard; the 1,001st waits for the next run", async () => {
    const before = await db.prepare("SELECT COUNT(*) AS n FROM failed_notices").first<{ n: number }>();
    const at = new Date().toISOString();
    const rows = Array.from({ length: REPLAY_PAGE + 1 }, (_, index) => {
      const eventId = idAt(new Date(Date.parse(at) - (REPLAY_PAGE + 1 - index)));
      return db
        .prepare("INSERT INTO failed_notices (event_id, receipt_id, payload, created_at, failed_at, attempts, last_error) VALUES (?1, ?1, '{}', ?2, ?2, 1, 'refused')")
        .bind(eventId, at);
    });
    await db.batch(rows);
    const [, moved] = await runBatch(db, replayFailed([]));
    expect(moved!.results).toHaveLength(REPLAY_PAGE);
    const after = await db.prepare("SELECT COUNT(*) AS n FROM failed_notices").first<{ n: number }>();
    expect(after!.n).toBe(before!.n + 1);
    await runBatch(db, replayFailed([]));
    expect(await db.prepare("SELECT COUNT(*) AS n FROM failed_notices").first()).toEqual({ n: 0 });
  });

  it("an event no push of which failed is dead-lettered once its retry window since it was made is over, with a stand-in for its last error", async () => {
    const t0 = new Date();
    const event = await recordedEvent(t0);
    expect(await deadLetter(db, event.event_id, new Date(t0.getTime() + WINDOW_MS), WINDOW_MS)).toBe("failed");
    const failed = await db.prepare("SELECT last_error FROM failed_notices WHERE event_id = ?1").bind(event.event_id).first();
    expect(failed).toEqual({ last_error: "dead-lettered with no failed attempt recorded" });
  });

  it("replay without event ids replays every failed event; with ids only those", async () => {
    const t0 = new Date();
    const [one, two] = [await recordedEvent(t0), await recordedEvent(t0)];
    for (const event of [one, two]) await deadLetter(db, event.event_id, new Date(t0.getTime() + WINDOW_MS), WINDOW_MS);
    const [, some] = await runBatch(db, replayFailed([one.event_id]));
    expect(some!.results).toEqual([{ event_id: one.event_id, receipt_id: one.event_id }]);
    expect(await stateOf(two.event_id, t0)).toBe("failed");
    const [, rest] = await runBatch(db, replayFailed([]));
    expect(rest!.results).toContainEqual({ event_id: two.event_id, receipt_id: two.event_id });
    expect(await stateOf(two.event_id, t0)).toBe("recorded");
  });
});

describe("outbox: a receipt's events", () => {
  it("its created event is recorded only by the add that stored the receipt, its deleted event only for the receipt's owner", async () => {
    const t0 = new Date();
    const { created, deleted } = await storedReceiptEvents(t0);
    expect(await stateOf(created.event_id, t0)).toBe("recorded");
    // The same receipt again (a retry after a first run that committed) stores nothing and records no event.
    const again = { ...created, event_id: idOn(shard) };
    const retried = await storeReceipt(shard, { ...created, body: '{"total":1}', user_key: uniqueId("key") }, again);
    expect(retried.kind).toBe("added");
    expect(await stateOf(again.event_id, t0)).toBe("purged");

    const stranger = { ...deleted, event_id: idOn(shard), client_id: "pos-2" };
    await runBatch(db, [recordDeletedIfOwned(stranger, "no fence"), recordDeletedIfOwned(deleted, "no fence"), recordDeletedIfOwned(deleted, "no fence")]);
    expect(await stateOf(stranger.event_id, t0)).toBe("purged");
    expect(await stateOf(deleted.event_id, t0)).toBe("recorded");
  });

  it("a deleted event waits while its receipt's created event is claimed, and goes once that one is delivered", async () => {
    const t0 = new Date();
    const { created, deleted } = await storedReceiptEvents(t0);
    await runBatch(db, [recordDeletedIfOwned(deleted, "no fence")]);

    const [createdClaim] = await claimEvents(db, [created.event_id], t0, LEASE_MS);
    expect(createdClaim).toEqual({ status: "claimed", payload: JSON.stringify(created), attempts: 1, retryUntil: null, pausedMs: 0, lateMs: 0, body: '{"total":1}', endpointDown: false });
    // Looked at again soon: a push ends long before its claim does.
    expect(await claimEvents(db, [deleted.event_id], t0, LEASE_MS)).toEqual([{ status: "held", until: new Date(t0.getTime() + 3 * SECOND) }]);
    expect(await stateOf(deleted.event_id, t0)).toBe("recorded");

    await settleEvents(db, { delivered: [created.event_id], failed: [] }, t0);
    expect(await claimEvents(db, [deleted.event_id], t0, LEASE_MS)).toMatchObject([{ status: "claimed", attempts: 1 }]);
  });

  it("an erasure purges every event of the receipts it selects, in the outbox and among the failed ones", async () => {
    const t0 = new Date();
    const { created, deleted } = await storedReceiptEvents(t0);
    await runBatch(db, [recordDeletedIfOwned(deleted, "no fence")]);
    // Made a second after t0, its window over since.
    expect(await deadLetter(db, deleted.event_id, new Date(t0.getTime() + SECOND + WINDOW_MS), WINDOW_MS)).toBe("failed");
    const theReceipt = statement("SELECT ?1", created.receipt_id);
    await runBatch(db, eraseEventsOfReceipts(theReceipt));
    expect(await stateOf(created.event_id, t0)).toBe("purged");
    expect(await stateOf(deleted.event_id, t0)).toBe("purged");
  });
});

describe("docs/api.md#event-feed every event commits within EVENT_COMMIT_SECONDS of its event_id, or its change commits nothing", () => {
  const late = () => new Date(Date.now() - (EVENT_COMMIT_SECONDS + 1) * SECOND);
  const LATE = new RegExp(`event committed more than ${EVENT_COMMIT_SECONDS} s after its event_id was made: nothing stored`);

  it("an add whose event_id is older than the bound stores neither the receipt nor its Idempotency-Key record", async () => {
    const at = late();
    const owner = { receipt_id: idAt(at), chain_id: "chain-1", client_id: uniqueId("pos"), app_user_id: uniqueId("au") };
    const created: CreationNotice = { ...owner, event_id: idAt(at), type: "receipt.created", occurred_at: at.toISOString(), created_at: at.toISOString() };
    const receipt = { ...owner, body: "{}", created_at: at.toISOString(), user_key: uniqueId("key") };
    const response = { data: { ...owner, created_at: at.toISOString() }, status: "OK" as const, status_code: 200 as const };
    await expect(storeReceipt(shard, receipt, created, { key: "k-late", fingerprint: "f", response })).rejects.toThrow(LATE);
    await expect(storeReceipt(shard, receipt, created)).rejects.toThrow(LATE);
    expect(await db.prepare("SELECT 1 FROM receipts WHERE receipt_id = ?1").bind(owner.receipt_id).first()).toBeNull();
    expect(await db.prepare("SELECT 1 FROM idempotency_keys WHERE client_id = ?1").bind(owner.client_id).first()).toBeNull();
    expect(await stateOf(created.event_id, at)).toBe("purged");
  });

  it("a delete whose event_id is older than the bound leaves the receipt, with no event and no audit record; within the bound it commits", async () => {
    const { deleted } = await storedReceiptEvents(new Date());
    const stale = { ...deleted, event_id: idAt(late()) };
    await expect(deleteOwnedReceipt(shard, stale, "no fence", "ray-late")).rejects.toThrow(LATE);
    expect(await db.prepare("SELECT 1 FROM receipts WHERE receipt_id = ?1").bind(deleted.receipt_id).first()).not.toBeNull();
    expect(await db.prepare("SELECT 1 FROM audit_log WHERE request_id = 'ray-late'").first()).toBeNull();
    expect(await stateOf(stale.event_id, new Date())).toBe("purged");
    const slow = { ...deleted, event_id: idAt(new Date(Date.now() - (EVENT_COMMIT_SECONDS - 1) * SECOND)) };
    expect(await deleteOwnedReceipt(shard, slow, "no fence", "ray-slow")).toEqual({ deleted: true });
  });

  it("a replay moves a failed event of any age back to the outbox", async () => {
    const event: AppUserErasedEvent = { event_id: idAt(late()), type: "app_user.erased", occurred_at: late().toISOString(), app_user_id: uniqueId("au"), receipts: 0 };
    await expect(runBatch(db, [recordErasedEvent(event, "1")])).rejects.toThrow(LATE);
    await db.prepare("INSERT INTO failed_notices (event_id, receipt_id, payload, created_at, failed_at, attempts, last_error) VALUES (?1, ?1, ?2, ?3, ?3, 5, 'refused')")
      .bind(event.event_id, JSON.stringify(event), event.occurred_at)
      .run();
    await runBatch(db, replayFailed([event.event_id]));
    expect(await stateOf(event.event_id, new Date())).toBe("recorded");
  });
});
