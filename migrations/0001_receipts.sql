-- Receipts that POS clients add and app users hold (docs/api.md#add).
-- receipt_id is a UUIDv7 made by the service: time-ordered, so new rows append to the primary
-- key's b-tree instead of landing at random pages, and over 70 random bits make it unguessable.
-- The delete path finds a receipt by its primary key; the index serves an app user's listing
-- within a chain, newest first.
CREATE TABLE receipts (
  receipt_id  TEXT PRIMARY KEY,
  chain_id    TEXT NOT NULL,
  client_id   TEXT NOT NULL,
  app_user_id TEXT NOT NULL,
  body        TEXT NOT NULL,
  created_at  TEXT NOT NULL
) STRICT;

CREATE INDEX receipts_by_app_user ON receipts (chain_id, app_user_id, receipt_id DESC);
