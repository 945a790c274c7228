-- Idempotency-Key records of add (docs/api.md#add): the first answer to one client's key, kept so
-- that a retry within 24 hours gets that answer again instead of adding a second receipt.
-- The key is per client (two clients may pick the same key). fingerprint is a hash of what the
-- request asked for (body, chain_id, app_user_id), so the same key for a different receipt is
-- told apart (409). receipt_id says which request's insert the row belongs to: add inserts the
-- receipt only when the row holds its own receipt_id, in the same batch. A row older than
-- 24 hours counts as absent; the cron job deletes such rows, oldest first through the index.
-- No foreign key to receipts: a receipt may be deleted while its key is still remembered.
CREATE TABLE idempotency_keys (
  client_id       TEXT NOT NULL,
  idempotency_key TEXT NOT NULL,
  fingerprint     TEXT NOT NULL,
  receipt_id      TEXT NOT NULL,
  response        TEXT NOT NULL,
  created_at      TEXT NOT NULL,
  PRIMARY KEY (client_id, idempotency_key)
) STRICT;

CREATE INDEX idempotency_keys_by_created_at ON idempotency_keys (created_at);
