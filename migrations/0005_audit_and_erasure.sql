-- The audit trail (docs/api.md#audit) and what erasing an app user needs (docs/api.md#erasure).
--
-- audit_log: one row per removal, written in the same transaction as the removal itself: a
-- delete's batch inserts its row (action receipt.deleted, client_id the POS client), an erasure
-- one row per receipt it erased and one for the erasure itself (action app_user.erased,
-- client_id 'operator', receipt_id and chain_id NULL on that last one). app_user holds the
-- app_user_id until that app user is erased, then a keyed hash ('hmac-sha256:<hex>') in its
-- place. request_id: the delete's request reference (cf-ray), or the erasure's event_id. Rows are
-- kept AUDIT_RETENTION_DAYS (400) and purged by the cron job, oldest first through audit_by_at.
-- Times are ISO 8601 UTC strings from Date#toISOString, so they compare correctly as text.
CREATE TABLE audit_log (
  audit_id   INTEGER PRIMARY KEY,            -- rowid: appends, and orders records of one instant
  at         TEXT NOT NULL,
  action     TEXT NOT NULL,                  -- 'receipt.deleted' | 'app_user.erased'
  receipt_id TEXT,
  chain_id   TEXT,
  client_id  TEXT NOT NULL,                  -- the POS client, or 'operator'
  app_user   TEXT NOT NULL,
  request_id TEXT NOT NULL
) STRICT;

-- `npm run audit -- receipt|client|chain <id> [--since]`, newest first.
CREATE INDEX audit_by_receipt ON audit_log (receipt_id, at);
CREATE INDEX audit_by_client ON audit_log (client_id, at);
CREATE INDEX audit_by_chain ON audit_log (chain_id, at);
-- The retention purge.
CREATE INDEX audit_by_at ON audit_log (at);
-- Erasure: an app user's records, to find what their deleted receipts left behind and to put
-- the keyed hash in place of the app_user_id.
CREATE INDEX audit_by_app_user ON audit_log (app_user);

-- Erasure removes every outbox row of the app user's receipts, delivered ones too (their payload
-- names the app user), so the by-receipt index now covers every row, not only undelivered ones.
DROP INDEX notice_outbox_by_receipt;
CREATE INDEX notice_outbox_by_receipt ON notice_outbox (receipt_id);

-- Erasure removes the Idempotency-Key records whose stored answer is one of the app user's
-- receipts. The table holds a day of keys, so this index stays small.
CREATE INDEX idempotency_keys_by_receipt ON idempotency_keys (receipt_id);
