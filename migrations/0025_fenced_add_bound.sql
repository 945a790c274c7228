-- An add under an erasure's fence stores nothing and records no event, yet it answers with its
-- receipt as stored and erased at once (docs/api.md#erasure): its answer names a receipt made at
-- its created_at, which an export of the app user at a later instant must hold. So it keeps to
-- the bound of 0018 as much as an add that stores.
--
-- Before this, only the event's insert checked the bound, and a fenced add's insert chose no row,
-- so nothing was checked. A call that made good a claim made ahead long before (docs/storage.md
-- "Making a claim good"), after an erasure had fenced the receipt's shard, answered with the dead
-- call's receipt and its old created_at: a receipt that no export made between that time and the
-- erasure could hold, since it was never stored. The soak found such an answer.
--
-- Add now inserts into this view, with the fence's verdict as a column, wherever its key lets it
-- (src/storage/receipts.ts): the trigger refuses a fenced add whose event_id is older than the
-- bound with 0018's message, and the call stores a receipt of its own under fresh IDs, which the
-- fence then covers or not by its own time. An add that is not fenced is checked where it was,
-- when its event is recorded, and only then: a retry whose first run committed stores nothing
-- and checks nothing. 0022's view and trigger stay as they are: a Worker of the version before
-- this one, still serving while a deploy rolls out after the migration, adds through them.
--
-- 5 is src/shared/config.ts EVENT_COMMIT_SECONDS, as in 0018.
CREATE VIEW receipt_timely_adds AS
SELECT receipt_id, chain_id, client_id, app_user_id, format, deflated, created_at,
  NULL AS event_id, NULL AS event_payload, NULL AS event_at, NULL AS fenced
FROM receipts WHERE 0;

CREATE TRIGGER receipt_timely_adds_insert INSTEAD OF INSERT ON receipt_timely_adds
BEGIN
  SELECT RAISE(ABORT, 'event committed more than 5 s after its event_id was made: nothing stored')
  WHERE NEW.fenced AND NEW.event_id < printf('%08x-%04x',
    (CAST(unixepoch('subsec') * 1000 AS INTEGER) - 5000) >> 16,
    (CAST(unixepoch('subsec') * 1000 AS INTEGER) - 5000) & 65535);
  INSERT INTO receipts (receipt_id, chain_id, client_id, app_user_id, body, format, deflated, created_at)
  SELECT NEW.receipt_id, NEW.chain_id, NEW.client_id, NEW.app_user_id, '', NEW.format, NEW.deflated, NEW.created_at
  WHERE NOT NEW.fenced
  ON CONFLICT (receipt_id) DO NOTHING;
  INSERT INTO event_records (event_id, receipt_id, payload, created_at)
  SELECT NEW.event_id, NEW.receipt_id, NEW.event_payload, NEW.event_at WHERE changes() = 1;
END;
