-- Merge a staging table into shardq.tasks (append mode), applying the placement and
-- keyed-task rules of insert_rows.  Returns the rows staged, the tasks inserted or
-- coalesced into a waiting task of their key, and no count of new ids.
WITH ins AS (
    {insert}
)
SELECT (SELECT count(*) FROM {stage}) AS staged, (SELECT count(*) FROM ins) AS tasks,
       NULL::bigint AS fresh
