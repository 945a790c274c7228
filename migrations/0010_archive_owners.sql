-- Who owns each archived receipt (docs/storage.md#archived-owners): the three fields delete
-- compares with its headers, so that an archived receipt's refusals are a live one's (a wrong
-- app_user_id names the receipt's owner, where the per-user layout in R2 would find nothing), and
-- an ID the shard never archived costs no R2 call. The move writes a row in the batch that
-- removes the receipt; a delete removes it with the tombstone, an erasure with the user's objects.
-- Without rowid the primary key is the table: one B-tree, no second copy of receipt_id.
CREATE TABLE archived_owners (
  receipt_id  TEXT PRIMARY KEY,
  client_id   TEXT NOT NULL,
  chain_id    TEXT NOT NULL,
  app_user_id TEXT NOT NULL
) STRICT, WITHOUT ROWID;
