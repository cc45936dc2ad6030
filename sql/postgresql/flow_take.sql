-- Take a batch of events (the LIMIT below) of the flows this resolver locked (flow_pick),
-- oldest first: they are deleted in the transaction that folds them in, so each counts
-- once.  Each flow's oldest events are read from its own range of flow_events' key (a
-- LATERAL subquery with LIMIT, which the planner neither flattens nor turns into a scan
-- of the table: as one scan for all the flows, a plan made on statistics taken between
-- bursts of events read the whole table).  The rows are deleted by their ctid (joined
-- back on the key, the planner may hash the batch and read the whole table to find it).
-- No row of these flows moves meanwhile: only the resolver that locked a flow, or a
-- cancel waiting for that lock, deletes its events, and events are never updated.
WITH picked AS (
    SELECT x.ctid
    FROM unnest(%(flows)s::uuid[]) AS f(id)
    CROSS JOIN LATERAL (
        SELECT e.ctid, e.at
        FROM shardq.flow_events AS e
        WHERE e.flow_id = f.id
        ORDER BY e.at
        LIMIT {limit}
    ) AS x
    ORDER BY f.id, x.at
    LIMIT {limit}
)
DELETE FROM shardq.flow_events AS e
WHERE e.ctid = ANY(ARRAY(SELECT picked.ctid FROM picked))
RETURNING e.flow_id, e.at, e.task_id, e.outcome, e.next, e.n
