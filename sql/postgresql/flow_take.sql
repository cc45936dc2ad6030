-- Take a bounded batch of events of the flows this resolver locked (flow_pick), oldest first:
-- they are deleted in the transaction that folds them in, so each counts once.  The
-- rows are picked by a read of each flow's range of flow_events_pkey, then deleted by
-- their ctid (a tuple IN (subquery) would be planned as a join over the whole table).
DELETE FROM shardq.flow_events AS e
WHERE e.ctid = ANY(ARRAY(
    SELECT x.ctid
    FROM shardq.flow_events AS x
    WHERE x.flow_id = ANY(%(flows)s::uuid[])
    ORDER BY x.flow_id, x.at
    LIMIT {limit}))
RETURNING e.flow_id, e.at, e.task_id, e.outcome, e.next, e.n
