-- The event feed keeps a receipt's receipt.created for its whole window, also after the archive
-- moved the receipt to R2 (docs/api.md#event-feed, docs/storage.md "notice_outbox"): the feed
-- splices a created event's body from the receipt's row, which the move removes.
--
-- archived_body: the receipt's body as add stored it, copied by the move into its created
-- event's row in the batch that removes the receipt, while that row is still in the outbox (until
-- 14 days after its delivery; with the default archive age of 45 days it is long gone, and no
-- copy is made). NULL on every other row. The copy lives exactly as long as the archived
-- receipt's owner row (migration 0010): a delete of the archived receipt and an erasure's
-- archive pass both remove that row, and the trigger below removes the copy in the same
-- transaction; the purge of delivered rows takes it with its row.
ALTER TABLE notice_outbox ADD COLUMN archived_body TEXT;

-- The created event of a receipt is made in the millisecond of its receipt_id: one range of the
-- primary key (docs/storage.md "notice_outbox").
CREATE TRIGGER archived_owners_forget_body AFTER DELETE ON archived_owners
BEGIN
  UPDATE notice_outbox SET archived_body = NULL
  WHERE event_id > substr(OLD.receipt_id, 1, 13) AND event_id < substr(OLD.receipt_id, 1, 13) || '~'
    AND receipt_id = OLD.receipt_id AND archived_body IS NOT NULL;
END;
