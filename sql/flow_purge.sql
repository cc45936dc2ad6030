-- Retention: delete a bounded batch of flows that ended longer ago than their
-- keep_result_s (read through flows_finished); their results expire with them.
DELETE FROM shardq.flows
WHERE id = ANY(ARRAY(
    SELECT f.id FROM shardq.flows AS f
    WHERE f.finished_at IS NOT NULL
      AND f.finished_at <= coalesce(%(now)s::timestamptz, now())
                           - f.keep_result_s * interval '1 second'
    ORDER BY f.finished_at
    LIMIT {limit}))
RETURNING id
