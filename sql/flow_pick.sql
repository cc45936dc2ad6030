-- The flows whose events the resolver folds in next (shardq.loops.resolver): a bounded
-- number of flows that have events, found by a loose scan of flow_events' key (one probe
-- per flow, however many events each has), each locked so that one resolver at a time
-- folds a flow's events, in order; a flow another resolver holds is skipped.
WITH RECURSIVE f AS (
    (SELECT e.flow_id FROM shardq.flow_events AS e ORDER BY e.flow_id LIMIT 1)
    UNION ALL
    SELECT (SELECT e.flow_id FROM shardq.flow_events AS e
            WHERE e.flow_id > f.flow_id ORDER BY e.flow_id LIMIT 1)
    FROM f
    WHERE f.flow_id IS NOT NULL
)
SELECT fl.id, fl.kind
FROM shardq.flows AS fl
WHERE fl.id = ANY(ARRAY(SELECT f.flow_id FROM f WHERE f.flow_id IS NOT NULL LIMIT {limit}))
FOR UPDATE SKIP LOCKED
