-- An event's retry window counts only the time the push service was not down as a whole
-- (docs/reliability.md#delivery-for-days). While it is down the notifier pushes a probe now and
-- then and holds every other event back: those events make no attempt, so an outage used up their
-- window all the same, and the first failure of an event after the push service came back
-- dead-lettered it, after as few as two attempts of its own (seen in the soak: an outage of 24 s
-- against a window of 90 s, and events dead-lettered after 2 to 5 attempts).
--
-- down_ms: this shard's copy of the time the push service was down, summed over every outage
--   that ended (ms); the one going on is `down_since` to now. Only ever grows.
-- window_down_ms: the shard's down time, so summed, when the event's retry window opened (its
--   first failed attempt); NULL before, and after a failure that dead-letters it. The window's end
--   is retry_until plus the down time since, at most one window more.
ALTER TABLE push_endpoint ADD COLUMN down_ms INTEGER NOT NULL DEFAULT 0;
ALTER TABLE notice_outbox ADD COLUMN window_down_ms INTEGER;
