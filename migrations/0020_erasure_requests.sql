-- An erasure's request (docs/api.md#erasure, docs/storage.md#personal-data): the app_user_id that
-- an erasure's Workflow instance works on, kept on the first shard (by name) from the command that
-- starts the erasure until the step that records its event, whose batch deletes it. A Workflow
-- keeps an instance's params, step results and output for as long as it keeps the instance, where
-- no erasure reaches: so an instance starts with request_id alone, and reads the ID from here
-- inside each step that needs it.
CREATE TABLE erasure_requests (
  request_id   TEXT PRIMARY KEY,
  app_user_id  TEXT NOT NULL,
  requested_at TEXT NOT NULL
) STRICT;
