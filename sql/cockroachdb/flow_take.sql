-- Take a bounded batch of events of the flows this resolver locked (flow_pick), oldest
-- first: they are deleted in the transaction that folds them in, so each counts once.
-- CockroachDB deletes with ORDER BY and LIMIT directly: one ordered read of the locked
-- flows' ranges of flow_events_pkey, no second lookup of each row by its key.
DELETE FROM shardq.flow_events
WHERE flow_id = ANY(%(flows)s::uuid[])
ORDER BY flow_id, at
LIMIT {limit}
RETURNING flow_id, at, task_id, outcome, next, n
