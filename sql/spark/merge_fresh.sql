-- Merge a staging table into shardq.tasks (idempotent mode).  The ledger takes every
-- distinct id of the staging table; only the ids it did not hold yet (fresh) become
-- tasks, so a re-run of the same job, or a Spark task that wrote its rows twice,
-- inserts nothing twice.  Two merges of the same ids at once queue on the ledger's
-- primary key: the second finds them taken.  taken: whether this merge wrote anything
-- new, or had nothing to write (an empty staging table); false when the ledger held
-- every id already (a re-run).
WITH fresh AS (
    INSERT INTO shardq.spark_ledger (id)
    SELECT DISTINCT s.id FROM {stage} AS s
    ON CONFLICT (id) DO NOTHING
    RETURNING id
), ins AS (
    {insert}
)
SELECT (SELECT count(*) FROM {stage}) AS staged, (SELECT count(*) FROM ins) AS tasks,
       (SELECT count(*) FROM fresh) AS fresh,
       EXISTS (SELECT 1 FROM fresh) OR NOT EXISTS (SELECT 1 FROM {stage}) AS taken
