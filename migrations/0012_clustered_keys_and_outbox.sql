-- Fewer rows written per receipt (docs/scale.md §7): D1 bills every index entry an insert writes
-- as a row, and both tables below paid for two they need not have.
--
-- As rowid tables with a text primary key, each row was written twice: the row under its rowid,
-- and the primary key's own index. WITHOUT ROWID stores the row in the primary key's b-tree,
-- which both tables are looked up by (a client's key; an event_id), so each insert writes one
-- entry less. Their rows are small (an answer without the receipt's body, an event's payload),
-- well under the size past which SQLite advises against WITHOUT ROWID.
--
-- idempotency_keys also loses its index by receipt_id, which only an erasure read: the erasure
-- now finds a receipt's key record under its client_id, the first column of the primary key
-- (the receipt and its audit records name the client), reading one day of that client's keys.
--
-- notice_outbox loses its index by receipt_id too, an entry on every event: an event_id is a
-- UUIDv7 that begins with the millisecond its event was made, and a receipt's created event is
-- made in the millisecond of its receipt_id, a deleted event in that of the deletion (its audit
-- record's `at`), an erasure's event filed under its own ID. The claim's hold and the erasure
-- find a receipt's events in that millisecond's range of the primary key instead.
--
-- SQLite cannot change a table's storage in place: each table is rebuilt with its rows and its
-- remaining indexes made anew, in one migration, so it runs on a shard that holds data.

CREATE TABLE idempotency_keys_clustered (
  client_id       TEXT NOT NULL,
  idempotency_key TEXT NOT NULL,
  fingerprint     TEXT NOT NULL,
  receipt_id      TEXT NOT NULL,
  response        TEXT NOT NULL,
  created_at      TEXT NOT NULL,
  erased_at       TEXT,
  PRIMARY KEY (client_id, idempotency_key)
) STRICT, WITHOUT ROWID;

INSERT INTO idempotency_keys_clustered (client_id, idempotency_key, fingerprint, receipt_id, response, created_at, erased_at)
SELECT client_id, idempotency_key, fingerprint, receipt_id, response, created_at, erased_at FROM idempotency_keys;

DROP TABLE idempotency_keys;
ALTER TABLE idempotency_keys_clustered RENAME TO idempotency_keys;

-- The cron job's expiry, oldest first.
CREATE INDEX idempotency_keys_by_created_at ON idempotency_keys (created_at);

CREATE TABLE notice_outbox_clustered (
  event_id      TEXT PRIMARY KEY,
  receipt_id    TEXT NOT NULL,
  payload       TEXT NOT NULL,
  created_at    TEXT NOT NULL,
  enqueued_at   TEXT,
  delivered_at  TEXT,
  claimed_until TEXT,
  attempts      INTEGER NOT NULL DEFAULT 0,
  last_error    TEXT
) STRICT, WITHOUT ROWID;

INSERT INTO notice_outbox_clustered (event_id, receipt_id, payload, created_at, enqueued_at, delivered_at, claimed_until, attempts, last_error)
SELECT event_id, receipt_id, payload, created_at, enqueued_at, delivered_at, claimed_until, attempts, last_error FROM notice_outbox;

DROP TABLE notice_outbox;
ALTER TABLE notice_outbox_clustered RENAME TO notice_outbox;

-- As migration 0007 left it: the cron re-send's undelivered events in created_at order.
CREATE INDEX notice_outbox_pending ON notice_outbox (created_at) WHERE delivered_at IS NULL;
