-- The archive tier (docs/storage.md#archive): receipts past the archive age move from this shard
-- to R2, and these tables are what the shard keeps of them.

-- One row per move of this shard (a Workflow instance): what `npm run archive -- status` reports
-- as the last run, and what the shard's archived receipts, objects and bytes add up from.
CREATE TABLE archive_runs (
  run_id      TEXT PRIMARY KEY,
  cutoff      TEXT NOT NULL,
  started_at  TEXT NOT NULL,
  finished_at TEXT,
  receipts    INTEGER NOT NULL DEFAULT 0,
  objects     INTEGER NOT NULL DEFAULT 0,
  bytes       INTEGER NOT NULL DEFAULT 0
) STRICT;

-- Archived receipts that are gone: deleted by a POS after their move, or deleted while the move
-- copied them. The row makes "deleted" true at once (a second delete finds it gone), and the
-- sweep rewrites object_key without the receipt's line, then sets purged_at: the bytes are gone
-- from R2 within a day, not only hidden.
CREATE TABLE archive_tombstones (
  receipt_id TEXT PRIMARY KEY,
  object_key TEXT NOT NULL,
  deleted_at TEXT NOT NULL,
  purged_at  TEXT
) STRICT;

CREATE INDEX archive_tombstones_unpurged ON archive_tombstones (object_key) WHERE purged_at IS NULL;
