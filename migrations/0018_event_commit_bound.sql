-- Every event commits within 5 seconds of its event_id's time (docs/api.md#event-feed "The tail"),
-- so that the event feed, which holds back its newest FEED_SETTLE_SECONDS (more than 5), never
-- hands out a cursor past an event that commits later: a reader that follows `next` alone sees
-- every event once.
--
-- An event_id is a UUIDv7 made in a Worker just before the batch that records its event. Every
-- new event goes into the outbox through the view event_records, whose trigger compares the
-- event_id's time (its first 48 bits, as text: the 13 characters below) with this database's
-- clock at the insert, inside the transaction that commits it: an event older than 5 seconds
-- aborts that whole transaction, so nothing of its change is stored, and the caller may try
-- again with a fresh event_id. Where the insert chooses no row (a retry whose first run
-- committed, a receipt no longer owned), nothing is checked: nothing commits.
--
-- While a deploy rolls out after this migration, a Worker of the version before still records
-- straight into notice_outbox, unchecked, for those minutes.
--
-- 5 is src/shared/config.ts EVENT_COMMIT_SECONDS. A replay of failed events (moved back from
-- failed_notices, where the feed read them all along) writes notice_outbox directly.
CREATE VIEW event_records AS
SELECT event_id, receipt_id, payload, created_at FROM notice_outbox WHERE 0;

CREATE TRIGGER event_records_insert INSTEAD OF INSERT ON event_records
BEGIN
  SELECT RAISE(ABORT, 'event committed more than 5 s after its event_id was made: nothing stored')
  WHERE NEW.event_id < printf('%08x-%04x',
    (CAST(unixepoch('subsec') * 1000 AS INTEGER) - 5000) >> 16,
    (CAST(unixepoch('subsec') * 1000 AS INTEGER) - 5000) & 65535);
  INSERT INTO notice_outbox (event_id, receipt_id, payload, created_at)
  VALUES (NEW.event_id, NEW.receipt_id, NEW.payload, NEW.created_at)
  ON CONFLICT (event_id) DO NOTHING;
END;

-- Add's triggers (migrations 0014 and 0015) record their created events through event_records too.
DROP TRIGGER receipt_adds_insert;

CREATE TRIGGER receipt_adds_insert INSTEAD OF INSERT ON receipt_adds
BEGIN
  INSERT INTO receipts (receipt_id, chain_id, client_id, app_user_id, body, created_at)
  VALUES (NEW.receipt_id, NEW.chain_id, NEW.client_id, NEW.app_user_id, NEW.body, NEW.created_at)
  ON CONFLICT (receipt_id) DO NOTHING;
  INSERT INTO event_records (event_id, receipt_id, payload, created_at)
  SELECT NEW.event_id, NEW.receipt_id, NEW.event_payload, NEW.event_at WHERE changes() = 1;
END;

DROP TRIGGER receipt_format_adds_insert;

CREATE TRIGGER receipt_format_adds_insert INSTEAD OF INSERT ON receipt_format_adds
BEGIN
  INSERT INTO receipts (receipt_id, chain_id, client_id, app_user_id, body, format, mapped, created_at)
  VALUES (NEW.receipt_id, NEW.chain_id, NEW.client_id, NEW.app_user_id, NEW.body, NEW.format, NEW.mapped, NEW.created_at)
  ON CONFLICT (receipt_id) DO NOTHING;
  INSERT INTO event_records (event_id, receipt_id, payload, created_at)
  SELECT NEW.event_id, NEW.receipt_id, NEW.event_payload, NEW.event_at WHERE changes() = 1;
END;
