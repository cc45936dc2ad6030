-- Record what became of nodes of flows, as part of the statement that did it: the rows
-- of the CTE `flow_ended` (flow_id, id, outcome, next) the statement defines.  Tasks
-- outside flows (flow_id NULL) write nothing.  The flows' resolver folds these rows in
-- and deletes them (shardq.loops.resolver): a node's ack only inserts one row of its
-- own, so the acks of a flow's many nodes never wait for one another.
INSERT INTO shardq.flow_events (flow_id, at, task_id, outcome, next)
SELECT e.flow_id, coalesce(%(now)s::timestamptz, now()), e.id, e.outcome, e.next
FROM flow_ended AS e
WHERE e.flow_id IS NOT NULL
ON CONFLICT DO NOTHING
