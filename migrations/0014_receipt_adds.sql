-- Add in fewer statements (docs/scale.md §4): a receipt and its created event go in with one
-- insert into the view receipt_adds, whose trigger writes both rows. The view decides nothing:
-- which receipts go in (the erasure's fence, the Idempotency-Key's claim) stays in the WHERE of
-- the insert that src/storage/receipts.ts runs, and a row it selects is written here as given.
-- The event is recorded only where this very insert stored its receipt, so a retry that finds
-- the receipt already stored records no second event.
CREATE VIEW receipt_adds AS
SELECT receipt_id, chain_id, client_id, app_user_id, body, created_at,
  NULL AS event_id, NULL AS event_payload, NULL AS event_at
FROM receipts WHERE 0;

CREATE TRIGGER receipt_adds_insert INSTEAD OF INSERT ON receipt_adds
BEGIN
  INSERT INTO receipts (receipt_id, chain_id, client_id, app_user_id, body, created_at)
  VALUES (NEW.receipt_id, NEW.chain_id, NEW.client_id, NEW.app_user_id, NEW.body, NEW.created_at)
  ON CONFLICT (receipt_id) DO NOTHING;
  INSERT INTO notice_outbox (event_id, receipt_id, payload, created_at)
  SELECT NEW.event_id, NEW.receipt_id, NEW.event_payload, NEW.event_at WHERE changes() = 1
  ON CONFLICT (event_id) DO NOTHING;
END;
