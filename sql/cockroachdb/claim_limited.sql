-- Claim a bounded batch of a flow-controlled queue's tasks from one span (claim_where
-- with claim_range_ungrouped, _mixed or _group), giving each a free capacity slot
-- (claim_free), as sql/postgresql/claim_limited.sql does; rows are matched by their
-- primary key, as in claim.sql.  The unique partial indexes tasks_slots and
-- tasks_group_slots keep the limits under SERIALIZABLE as under PostgreSQL.
UPDATE shardq.tasks AS t SET
    {claim_set}
FROM (
    SELECT due.queue, due.status, due.exec_time, due.id,
           row_number() OVER (ORDER BY due.exec_time) AS i
    FROM (
        SELECT queue, status, exec_time, id
        FROM shardq.tasks
        WHERE {claim_where}
        ORDER BY exec_time
        LIMIT {limit}
        FOR UPDATE SKIP LOCKED
    ) AS due
) AS c
JOIN ({claim_free}) AS f ON f.i = c.i,
(SELECT coalesce(%(now)s::timestamptz, now()) AS now) AS clock
WHERE t.queue = c.queue
  AND t.status = c.status
  AND t.exec_time = c.exec_time
  AND t.id = c.id
{claim_returning}
