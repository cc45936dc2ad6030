-- Retention: delete a bounded batch of flows that ended longer ago than their
-- keep_result_s (read through flows_finished), and the results their tasks kept
-- (through results_flows).  Returns the flows deleted.
WITH gone AS (
    DELETE FROM shardq.flows
    WHERE id = ANY(ARRAY(
        SELECT f.id FROM shardq.flows AS f
        WHERE f.finished_at IS NOT NULL
          AND f.finished_at <= coalesce(%(now)s::timestamptz, now())
                               - f.keep_result_s * interval '1 second'
        ORDER BY f.finished_at
        LIMIT {limit}))
    RETURNING id
), kept AS (
    DELETE FROM shardq.results AS r WHERE r.flow_id IN (SELECT gone.id FROM gone)
)
SELECT gone.id FROM gone
