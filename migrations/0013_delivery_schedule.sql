-- Delivery for days (docs/reliability.md#delivery-for-days): Queues cap a message's retries and
-- delays far below the 72 hours a push service may be down, so each event's retry schedule lives
-- in its outbox row, and the cron's per-shard sweep hands an event to the queue again when due.
--
-- next_attempt_at: when the event's next push is due after a failed attempt; NULL while a queue
--   copy is on its way (the cron's re-send clears it) or before any attempt failed.
-- retry_until: the end of the event's retry window, set at its first failed attempt; an attempt
--   that fails at or after it dead-letters the event. A replay clears both.
ALTER TABLE notice_outbox ADD COLUMN next_attempt_at TEXT;
ALTER TABLE notice_outbox ADD COLUMN retry_until TEXT;

-- Whether the app push service is down, for every notifier isolate and the cron at once: while it
-- is, the notifier pushes only a probe now and then instead of one attempt per waiting event.
-- The notifier writes each change to every shard, so that each shard's cron sweep reads its own
-- copy (one invocation's sweep touches no other shard); the first shard by name (the home shard)
-- also hands out the probe slots, one conditional UPDATE each, whatever the number of isolates.
CREATE TABLE push_endpoint (
  id         INTEGER PRIMARY KEY CHECK (id = 1),
  down_since TEXT,                           -- NULL while pushes get through
  probe_at   TEXT,                           -- home shard: the next probe may start at or after this
  up_since   TEXT                            -- the last probe that succeeded: events waiting before it are re-sent
) STRICT;
INSERT INTO push_endpoint (id) VALUES (1);
