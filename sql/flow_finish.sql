-- Flows that ended: no node left in shardq.tasks and no event left to fold (one probe
-- of tasks_flows and one of flow_events' key each).  Their finished_at is set, and the
-- results their nodes kept for one another (expires_at infinity) expire the flow's
-- keep_result_s after it.  Returns the flows that ended.
WITH ended AS (
    UPDATE shardq.flows AS f SET finished_at = c.now
    FROM (SELECT coalesce(%(now)s::timestamptz, now()) AS now) AS c
    WHERE f.id = ANY(%(flows)s::uuid[])
      AND f.finished_at IS NULL
      AND NOT EXISTS (SELECT 1 FROM shardq.tasks AS t WHERE t.flow_id = f.id)
      AND NOT EXISTS (SELECT 1 FROM shardq.flow_events AS e WHERE e.flow_id = f.id)
    RETURNING f.id, f.keep_result_s, c.now
), expiring AS (
    UPDATE shardq.results AS r SET
        expires_at = ended.now + ended.keep_result_s * interval '1 second'
    FROM ended
    WHERE r.flow_id = ended.id
      AND r.expires_at = 'infinity'
    RETURNING r.id
)
SELECT ended.id FROM ended
