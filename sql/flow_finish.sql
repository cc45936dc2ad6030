-- Flows that ended: no node left in shardq.tasks and no event left to fold (one probe
-- of tasks_flows and one of flow_events' key each, the flows found by their key).
-- Their finished_at is set; the results their nodes kept stay until the janitor
-- deletes the flow, keep_result_s after it ended (flow_purge).  Returns the flows that
-- ended.
UPDATE shardq.flows AS f SET finished_at = c.now
FROM unnest(%(flows)s::uuid[]) AS u(id),
     (SELECT coalesce(%(now)s::timestamptz, now()) AS now) AS c
WHERE f.id = u.id
  AND f.finished_at IS NULL
  AND NOT EXISTS (SELECT 1 FROM shardq.tasks AS t WHERE t.flow_id = f.id)
  AND NOT EXISTS (SELECT 1 FROM shardq.flow_events AS e WHERE e.flow_id = f.id)
RETURNING f.id
