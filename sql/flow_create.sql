-- A new flow's row (shardq.ops.graphs), written in the transaction that writes its
-- nodes.  Its counts start at zero: the flows' resolver folds its nodes' events in.
INSERT INTO shardq.flows (id, kind, name, nodes, result_id, keep_result_s, created_at,
                          trace_context)
VALUES (%(flow_id)s::uuid, %(kind)s::text, %(name)s::text, %(nodes)s::int8,
        %(result_id)s::uuid, %(keep_result_s)s::float8, coalesce(%(now)s::timestamptz, now()),
        %(trace_context)s::text)
