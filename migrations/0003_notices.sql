-- Deletion notices on their way to the app user (docs/api.md#delete, #deletion-notices).
--
-- notice_outbox: the delete operation inserts a row in the same D1 batch that removes the receipt,
-- so a receipt can never be gone without its notice recorded. The row is the notice's source of
-- truth until delivery: the API Worker marks it enqueued after the queue send (the cron job
-- re-sends rows left unmarked), and the notifier claims it before a push and marks it delivered
-- after, which is how a second copy of one event_id is recognised and not pushed again.
-- Delivered rows are kept 14 days, the longest a queue can hold a copy, then purged by cron.
-- Times are ISO 8601 UTC strings from Date#toISOString, so they compare correctly as text.
CREATE TABLE notice_outbox (
  event_id      TEXT PRIMARY KEY,            -- UUIDv7: appends to the b-tree, unique per deletion
  receipt_id    TEXT NOT NULL,
  payload       TEXT NOT NULL,               -- the queue message as JSON, byte for byte what is pushed
  created_at    TEXT NOT NULL,               -- the deletion's occurred_at
  enqueued_at   TEXT,                        -- last queue send; NULL until one succeeded
  delivered_at  TEXT,                        -- push acknowledged (or logged, without a push URL)
  claimed_until TEXT,                        -- a delivery holds the notice until then (lease)
  attempts      INTEGER NOT NULL DEFAULT 0,  -- push attempts so far
  last_error    TEXT                         -- why the last attempt failed, for the operator
) STRICT;

-- The cron job's two questions: which notices were never enqueued, and which have been enqueued
-- for so long without delivery that their queue copy must be lost. Delivered rows stay out of it.
CREATE INDEX notice_outbox_pending ON notice_outbox (enqueued_at, created_at) WHERE delivered_at IS NULL;
-- The purge of delivered rows.
CREATE INDEX notice_outbox_delivered ON notice_outbox (delivered_at) WHERE delivered_at IS NOT NULL;

-- failed_notices: notices the push service refused for good, or that exhausted their retries.
-- The dead-letter queue's consumer moves a row here from the outbox, with the last error, so an
-- operator can list it (`npm run notices -- failed`) and replay it, which moves it back.
-- Rows stay until replayed: a notice that reached nobody must not vanish on a timer.
CREATE TABLE failed_notices (
  event_id   TEXT PRIMARY KEY,
  receipt_id TEXT NOT NULL,
  payload    TEXT NOT NULL,
  created_at TEXT NOT NULL,                  -- kept so a replayed row is as old as its deletion
  failed_at  TEXT NOT NULL,
  attempts   INTEGER NOT NULL,
  last_error TEXT NOT NULL
) STRICT;
