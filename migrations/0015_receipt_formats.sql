-- Receipts added in a published format (docs/api.md#dr-retail): the body stays as the till sent
-- it, `format` names its format and version (e.g. dr-retail/v1.1), and `mapped` holds the receipt
-- in our model, which the events, the feed and the archive carry beside the original. Both are
-- NULL for a receipt added in our own shape, whose body is that model already, as for every row
-- stored before this migration.
ALTER TABLE receipts ADD COLUMN format TEXT;
ALTER TABLE receipts ADD COLUMN mapped TEXT;

-- The insert of 0014 with the two columns. 0014's view and trigger stay as they are: a Worker of
-- the version before this one, still serving while a deploy rolls out after the migration, keeps
-- adding receipts of our own shape through them.
CREATE VIEW receipt_format_adds AS
SELECT receipt_id, chain_id, client_id, app_user_id, body, format, mapped, created_at,
  NULL AS event_id, NULL AS event_payload, NULL AS event_at
FROM receipts WHERE 0;

CREATE TRIGGER receipt_format_adds_insert INSTEAD OF INSERT ON receipt_format_adds
BEGIN
  INSERT INTO receipts (receipt_id, chain_id, client_id, app_user_id, body, format, mapped, created_at)
  VALUES (NEW.receipt_id, NEW.chain_id, NEW.client_id, NEW.app_user_id, NEW.body, NEW.format, NEW.mapped, NEW.created_at)
  ON CONFLICT (receipt_id) DO NOTHING;
  INSERT INTO notice_outbox (event_id, receipt_id, payload, created_at)
  SELECT NEW.event_id, NEW.receipt_id, NEW.event_payload, NEW.event_at WHERE changes() = 1
  ON CONFLICT (event_id) DO NOTHING;
END;
