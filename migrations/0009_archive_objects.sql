-- What this shard's moves have written to the archive, object by object: the object's receipts
-- (lines) and bytes as last written and read back. `npm run archive -- status` adds them up
-- without listing the bucket (a list is a Class A operation per 1,000 keys). The key names the
-- app user, so an erasure removes their rows here too.
CREATE TABLE archive_objects (
  object_key TEXT PRIMARY KEY,
  receipts   INTEGER NOT NULL,
  bytes      INTEGER NOT NULL
) STRICT;
