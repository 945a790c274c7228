-- receipt.created events (docs/api.md#receipt-events) share the outbox with receipt.deleted ones.
-- A deleted event is held while its receipt's created event is being pushed, so the app never
-- hears of a receipt after its deletion; that check, and the operators' look-ups, go by receipt.
CREATE INDEX notice_outbox_by_receipt ON notice_outbox (receipt_id) WHERE delivered_at IS NULL;
