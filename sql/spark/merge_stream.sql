-- Merge the staging table of one micro-batch of a stream (write_stream_tasks).  The
-- ledger takes the batch's id (a uuid5 of the stream and the batch id); the rows
-- become tasks only if it did not hold that id yet, in the same transaction, so a
-- batch Spark runs again (restarted from its checkpoint after the driver died before
-- committing the batch) inserts nothing.  Returns the rows staged, the tasks inserted
-- or coalesced into a waiting task of their key, the distinct new row ids, and whether
-- the ledger took the batch's id (false: the batch was merged before).
WITH fresh AS (
    INSERT INTO shardq.spark_ledger (id) VALUES (%(batch)s::uuid)
    ON CONFLICT (id) DO NOTHING
    RETURNING id
), ins AS (
    {insert}
)
SELECT (SELECT count(*) FROM {stage}) AS staged, (SELECT count(*) FROM ins) AS tasks,
       (SELECT count(DISTINCT s.id) FROM {stage} AS s WHERE EXISTS (SELECT 1 FROM fresh))
           AS fresh,
       EXISTS (SELECT 1 FROM fresh) AS taken
