-- Seal an open batch (one written piece by piece, as a Spark job writes one) with its
-- size: the flow counts its tasks, and a 'sealed' event tells the resolver how many
-- tasks its callback waits for (shardq.loops.resolver).  Only an open batch is sealed
-- (nodes 0 until then), once: run again after a lost reply, it changes nothing.
WITH f AS (
    UPDATE shardq.flows AS f SET nodes = %(total)s::int8 + 1
    WHERE f.id = %(flow_id)s::uuid AND f.kind = 'batch' AND f.nodes = 0
    RETURNING f.id
)
INSERT INTO shardq.flow_events (flow_id, at, task_id, outcome, next, n)
SELECT f.id, coalesce(%(now)s::timestamptz, now()), %(callback_id)s::uuid, 'sealed',
       ARRAY[%(callback_id)s::uuid], %(total)s::int8
FROM f
RETURNING flow_id
