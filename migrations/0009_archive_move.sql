-- The archive's move (docs/storage.md "Archive") leaves a receipt in its shard while an event of
-- it waits among the failed ones (a replay pushes its body, read from its row): one probe of this
-- index per receipt moved. Failed notices are few, and this index with them.
CREATE INDEX failed_notices_by_receipt ON failed_notices (receipt_id);
