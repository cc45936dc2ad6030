-- Merge a staging table into shardq.tasks (append mode), applying the placement and
-- keyed-task rules of insert_rows.  Returns the rows staged, the tasks inserted or
-- coalesced into a waiting task of their key, no count of new ids, and whether the rows
-- were taken (always: an append takes every row).
WITH ins AS (
    {insert}
)
SELECT (SELECT count(*) FROM {stage}) AS staged, (SELECT count(*) FROM ins) AS tasks,
       NULL::bigint AS fresh, TRUE AS taken
