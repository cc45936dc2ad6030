-- Retention: delete a bounded batch of flows that ended longer ago than their
-- keep_result_s (read through flows_finished, oldest first); their results expire with
-- them.  CockroachDB deletes with ORDER BY and LIMIT directly: the rows the index
-- finds are deleted where they are found, with no list of ids to look up again.
WITH gone AS (
    DELETE FROM shardq.flows
    WHERE finished_at IS NOT NULL
      AND finished_at <= coalesce(%(now)s::timestamptz, now()) - keep_result_s * interval '1 second'
    ORDER BY finished_at
    LIMIT {limit}
    RETURNING id
), kept AS (
    DELETE FROM shardq.results AS r WHERE r.flow_id IN (SELECT gone.id FROM gone)
)
SELECT gone.id FROM gone
