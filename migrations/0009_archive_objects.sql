-- What this shard's moves have written to the archive, object by object: the object's receipts
-- (lines) and bytes as last written and read back. `npm run archive -- status` adds them up
-- without listing the bucket (a list is a Class A operation per 1,000 keys). The key names the
-- app user, so an erasure removes their rows here too.
CREATE TABLE archive_objects (
  object_key TEXT PRIMARY KEY,
  receipts   INTEGER NOT NULL,
  bytes      INTEGER NOT NULL
) STRICT;

-- The move leaves a receipt in its shard while an event of it waits among the failed ones (a
-- replay would push its body, read from its row): one probe per receipt moved.
CREATE INDEX failed_notices_by_receipt ON failed_notices (receipt_id);
