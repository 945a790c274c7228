-- An erasure is an instant (docs/api.md#erasure): everything of the app user created at or before
-- it goes, also what an add in flight commits while the erasure runs.
--
-- erasure_fences: before an erasure sweeps a shard it writes a fence there, and add inserts a
-- receipt only while no fence of its app user has an instant at or after the receipt's
-- created_at. user_key is the keyed hash that stands for the app user in the audit trail
-- ('hmac-sha256:<hex>'), so no readable ID is stored; instant is the erasure's occurred_at, an ISO
-- 8601 UTC string that compares as time does. The primary key is the one index add's probe needs.
-- The cron job purges fences an hour after their instant: by then no add that began before it
-- is still in flight.
CREATE TABLE erasure_fences (
  user_key TEXT NOT NULL,
  instant  TEXT NOT NULL,
  PRIMARY KEY (user_key, instant)
) STRICT;

-- An Idempotency-Key record whose receipt an erasure removed is kept, so that a till's retry gets
-- the first answer again instead of storing the receipt anew: erased_at is set, and its stored
-- answer holds no app_user_id (a retry's own header, which its fingerprint matched, gives it back).
ALTER TABLE idempotency_keys ADD COLUMN erased_at TEXT;
