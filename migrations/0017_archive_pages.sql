-- The archive's pages in flight (docs/storage.md#archive-pages). A page of the move records here,
-- before it puts anything in R2, the lines it is about to write and the objects it found absent;
-- the batch that ends the page settles them and drops the row. A page whose step failed after
-- some of its puts finds, when it runs again, the lines its earlier attempt may have left in R2,
-- among them receipts deleted or erased since, which it no longer reads from `receipts`: they get
-- a tombstone and their lines are purged. The objects an attempt created are counted once, by the
-- attempt that ends the page. A row whose run stopped for good is settled by the next run.
-- One row per page (not per line): a page writes two rows, whatever its number of receipts.
CREATE TABLE archive_pages (
  page        TEXT PRIMARY KEY,  -- the run's ID and the receipt_id the page starts after
  run_id      TEXT NOT NULL,
  lines       TEXT NOT NULL,     -- JSON array: {receipt_id, created_at, user_key, object_key} per line written or to write
  new_objects TEXT NOT NULL      -- JSON array of the object keys found absent, not yet counted in archive_runs.objects
) STRICT, WITHOUT ROWID;
