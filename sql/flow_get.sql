-- One flow (shardq.ops.graphs): its row, its nodes still in shardq.tasks counted by
-- status (through tasks_flows), and its events not folded in yet counted by outcome.
SELECT f.id, f.kind, f.name, f.nodes, f.result_id, f.succeeded, f.dead, f.cancelled,
       f.created_at, f.cancelled_at, f.finished_at,
       (SELECT coalesce(jsonb_object_agg(s.status, s.n), '{{}}'::jsonb)
        FROM (SELECT t.status, count(*) AS n FROM shardq.tasks AS t
              WHERE t.flow_id = f.id GROUP BY t.status) AS s) AS live,
       (SELECT coalesce(jsonb_object_agg(s.outcome, s.n), '{{}}'::jsonb)
        FROM (SELECT e.outcome, count(*) AS n FROM shardq.flow_events AS e
              WHERE e.flow_id = f.id GROUP BY e.outcome) AS s) AS pending
FROM shardq.flows AS f
WHERE f.id = %(id)s::uuid
