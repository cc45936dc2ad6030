-- The flows whose events the resolver folds in next (shardq.loops.resolver): a bounded
-- number of flows that have events, found by a loose scan of flow_events' key (one probe
-- per flow, however many events each has), each locked so that one resolver at a time
-- folds a flow's events, in order; a flow another resolver holds is skipped.
-- The recursion counts its steps and stops at the limit itself: CockroachDB runs a
-- recursive CTE to its end before a LIMIT outside it applies.
WITH RECURSIVE f (flow_id, n) AS (
    (SELECT e.flow_id, 1 FROM shardq.flow_events AS e ORDER BY e.flow_id LIMIT 1)
    UNION ALL
    SELECT (SELECT e.flow_id FROM shardq.flow_events AS e
            WHERE e.flow_id > f.flow_id ORDER BY e.flow_id LIMIT 1), f.n + 1
    FROM f
    WHERE f.flow_id IS NOT NULL
      AND f.n < {limit}
)
SELECT fl.id, fl.kind
FROM shardq.flows AS fl
WHERE fl.id = ANY(ARRAY(SELECT f.flow_id FROM f WHERE f.flow_id IS NOT NULL))
FOR UPDATE SKIP LOCKED
