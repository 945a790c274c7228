-- Jobs an app client or an operator started for one app user (docs/api.md#jobs): an export of
-- their data, or their erasure. Kept on the first shard (by name).
--
-- app_user_jobs: one row per job, so that only the client that started it reads it, its
-- Idempotency-Key answers the same job again, and an erasure finds the exports of its app user
-- (their files go at once). user_key is the app user's keyed hash ('hmac-sha256:<hex>'), never
-- the app_user_id. The row lives as long as the export's file (EXPORT_KEPT_DAYS), then the cron
-- deletes both.
CREATE TABLE app_user_jobs (
  job_id          TEXT PRIMARY KEY,
  kind            TEXT NOT NULL,
  client_id       TEXT NOT NULL,
  idempotency_key TEXT NOT NULL,
  user_key        TEXT NOT NULL,
  created_at      TEXT NOT NULL,
  UNIQUE (client_id, idempotency_key)
) STRICT;
CREATE INDEX app_user_jobs_by_user ON app_user_jobs (user_key);
CREATE INDEX app_user_jobs_by_created ON app_user_jobs (created_at);

-- export_requests: the app_user_id an export's Workflow instance works on, as erasure_requests is
-- for an erasure (migration 0020): the instance's params name the request alone. Deleted by the
-- export's last step, and by an erasure of the app user.
CREATE TABLE export_requests (
  request_id   TEXT PRIMARY KEY,
  app_user_id  TEXT NOT NULL,
  requested_at TEXT NOT NULL
) STRICT;

-- On every shard, while an export reads it (docs/api.md#export "A consistent cut"):
-- export_holds: the export's hold of its app user (keyed hash). While it stands, a delete of one
-- of their receipts also copies the receipt into export_copies, and the purge of their archived
-- lines waits, so that a receipt that was there at the export's instant is read whole even when a
-- delete removes it while the export runs.
-- export_copies: those copies, with the deletion's instant; the export reads the ones deleted
-- after its instant. Both go with the export's last step, and with an erasure of the app user.
-- export_seen: the receipts an export read from this shard's D1, so that a receipt the archive's
-- move took to R2 meanwhile is not read twice.
CREATE TABLE export_holds (
  job_id   TEXT NOT NULL,
  user_key TEXT NOT NULL,
  PRIMARY KEY (user_key, job_id)
) STRICT, WITHOUT ROWID;

CREATE TABLE export_copies (
  job_id     TEXT NOT NULL,
  receipt_id TEXT NOT NULL,
  deleted_at TEXT NOT NULL,
  line       TEXT NOT NULL,
  PRIMARY KEY (job_id, receipt_id)
) STRICT;

CREATE TABLE export_seen (
  job_id     TEXT NOT NULL,
  receipt_id TEXT NOT NULL,
  PRIMARY KEY (job_id, receipt_id)
) STRICT, WITHOUT ROWID;
