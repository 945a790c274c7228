-- Fewer rows written per event (docs/scale.md §7), with the same questions answered.
--
-- The cron re-send's index held (enqueued_at, created_at), so every claim, which now marks its
-- event's arrival in enqueued_at, rewrote an index entry. It asks only about undelivered events,
-- a few minutes' worth, which it reads in created_at order: an index on created_at alone is
-- enough, and a claim touches no indexed column.
DROP INDEX notice_outbox_pending;
CREATE INDEX notice_outbox_pending ON notice_outbox (created_at) WHERE delivered_at IS NULL;

-- The purge of delivered rows walks the primary key instead: event_ids are UUIDv7, so the
-- oldest events come first, and an event is delivered after it is made. The index on
-- delivered_at cost a row written on every delivery and about 38 bytes per row for 14 days.
DROP INDEX notice_outbox_delivered;
