-- Whether a staged row is new (a stream's micro-batch): the ledger took the batch's id
-- now, so every row of the batch is.
EXISTS (SELECT 1 FROM fresh)
