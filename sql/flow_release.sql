-- Count down the nodes that wait for others by what a fold found (a node's count of
-- nodes it still waits for, `waits`), and release those that wait for nothing more:
-- 'available' where they stand in line (the place their enqueue gave them), with
-- what they take prepended to their arguments, as the payload's "pass" says (a node
-- without one takes nothing):
-- - one: the result of their one node (flow_deps[1]);
-- - list: the results of their nodes, in flow_deps' order (a chord's callback);
-- - counts: the flow's counts (a batch's callback): its id, and how many of its
--   nodes succeeded, died and were cancelled.
-- The results are read once, here; a node that waits for nothing more is never read
-- again.  Returns the queues of the nodes released, with how many each (and with
-- notify, wakes workers).
WITH d AS (
    SELECT u.id, u.n FROM unnest(%(ids)s::uuid[], %(counts)s::int8[]) AS u(id, n)
), released AS (
    UPDATE shardq.tasks AS t SET
        waits = t.waits - d.n,
        status = CASE WHEN t.waits - d.n <= 0 THEN 'available' ELSE 'waiting' END,
        payload = CASE WHEN t.waits - d.n > 0 OR NOT t.payload ? 'pass' THEN t.payload
                       ELSE jsonb_set(t.payload, ARRAY['args'], jsonb_build_array(
            CASE t.payload ->> 'pass'
                WHEN 'one' THEN (SELECT r.value FROM shardq.results AS r
                                 WHERE r.id = t.flow_deps[1])
                WHEN 'list' THEN (
                    SELECT coalesce(jsonb_agg((SELECT r.value FROM shardq.results AS r
                                               WHERE r.id = p.id) ORDER BY p.n), '[]'::jsonb)
                    FROM unnest(t.flow_deps) WITH ORDINALITY AS p(id, n))
                WHEN 'counts' THEN (
                    SELECT jsonb_build_object('flow', f.id::text, 'succeeded', f.succeeded,
                                              'dead', f.dead, 'cancelled', f.cancelled)
                    FROM shardq.flows AS f WHERE f.id = t.flow_id)
            END) || coalesce(t.payload -> 'args', '[]'::jsonb)) END
    FROM d
    WHERE t.id = d.id
      AND t.status = 'waiting'
    RETURNING t.queue, t.status
)
SELECT released.queue, count(*) AS n, {flow_notify}
FROM released
WHERE released.status = 'available'
GROUP BY released.queue
