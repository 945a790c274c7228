-- Receipt bodies stored deflated (docs/scale.md "Toward $3,500 a month", lever A; docs/storage.md
-- "receipts"). A row of the bench's 2,120-byte receipt took a 4,096-byte page of its own (4,263
-- bytes a receipt with its indexes): SQLite keeps a row whole on a page where it fits, and two of
-- about 2.2 KB do not fit on one. Deflated (`deflate-raw`, 465 bytes) four or five rows share a
-- page: 843 bytes a receipt (node:sqlite, 20,000 rows of this table, pages counted).
--
-- deflated: the body, and for a receipt in a published format (docs/api.md#dr-retail) its model
-- and a line feed before it, deflated together (src/storage/stored-body.ts). Written by add from
-- this migration on, with `body` empty (its column is NOT NULL) and `mapped` NULL. NULL on every
-- row stored before, which keeps its text body and model: every reader takes either.
-- The model deflated with its original rather than apart: 1,185 bytes a DR Retail receipt
-- against 1,527 apart and 2,211 with its model left as text.
ALTER TABLE receipts ADD COLUMN deflated BLOB;

-- notice_outbox.archived_body (0019) stays text: the move copies a receipt there only while its
-- created event's row is still in the outbox, 14 days after delivery at most, and with the default
-- archive age of 45 days never; a column that holds nothing at the defaults saves no page.

-- A delete's copy of the receipt for a running export (migration 0021) keeps it as stored: `line`
-- holds the row's columns as JSON, and the deflated texts go here, as they are, beside it.
ALTER TABLE export_copies ADD COLUMN deflated BLOB;

-- The insert of 0015 (as 0018 left it: its event recorded through event_records, which refuses
-- an event that would commit too late) with the deflated texts. 0014's and 0015's views and
-- triggers stay as they are: a Worker of the version before this one, still serving while a
-- deploy rolls out after the migration, keeps adding receipts with text bodies through them.
CREATE VIEW receipt_deflated_adds AS
SELECT receipt_id, chain_id, client_id, app_user_id, format, deflated, created_at,
  NULL AS event_id, NULL AS event_payload, NULL AS event_at
FROM receipts WHERE 0;

CREATE TRIGGER receipt_deflated_adds_insert INSTEAD OF INSERT ON receipt_deflated_adds
BEGIN
  INSERT INTO receipts (receipt_id, chain_id, client_id, app_user_id, body, format, deflated, created_at)
  VALUES (NEW.receipt_id, NEW.chain_id, NEW.client_id, NEW.app_user_id, '', NEW.format, NEW.deflated, NEW.created_at)
  ON CONFLICT (receipt_id) DO NOTHING;
  INSERT INTO event_records (event_id, receipt_id, payload, created_at)
  SELECT NEW.event_id, NEW.receipt_id, NEW.event_payload, NEW.event_at WHERE changes() = 1;
END;
