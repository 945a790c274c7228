-- An event's retry window does not count the notifier's own lateness either
-- (docs/reliability.md#delivery-for-days): the time between an attempt's due time and the claim of
-- the push that makes it, while the push service was up. A notifier starved of CPU (the soak on a
-- loaded machine) let an attempt due a second after the first failure run its claims out before
-- its push, again and again, and made it only about 90 s later, past a 90 s window: that push's
-- failure dead-lettered the event after two attempts of its own, as an outage did before 0023.
--
-- attempt_due_at: when the event's next attempt is due, as next_attempt_at when the failure
--   recorded it; kept when the cron hands the event over (which clears next_attempt_at) until
--   the next failure replaces it; NULL before the window opens, and after a failure that
--   dead-letters it.
-- attempt_down_ms: the shard's push_endpoint.down_ms (plus the outage going on) when that
--   failure recorded it: down time after it is the down-time allowance's, not lateness.
-- late_ms: the lateness of every attempt made since the window opened, summed (ms). The window's
--   end is retry_until plus the down time since it opened plus this (and the lateness of the
--   attempt now due), at most one window more in all.
ALTER TABLE notice_outbox ADD COLUMN attempt_due_at TEXT;
ALTER TABLE notice_outbox ADD COLUMN attempt_down_ms INTEGER;
ALTER TABLE notice_outbox ADD COLUMN late_ms INTEGER NOT NULL DEFAULT 0;
