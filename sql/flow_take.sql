-- Take a bounded batch of events of the flows this resolver locked (flow_pick), oldest
-- first: they are deleted in the transaction that folds them in, so each counts once.
DELETE FROM shardq.flow_events AS e
WHERE (e.flow_id, e.at, e.task_id, e.outcome) IN (
    SELECT x.flow_id, x.at, x.task_id, x.outcome
    FROM shardq.flow_events AS x
    WHERE x.flow_id = ANY(%(flows)s::uuid[])
    ORDER BY x.flow_id, x.at
    LIMIT {limit}
)
RETURNING e.flow_id, e.at, e.task_id, e.outcome, e.next, e.n
