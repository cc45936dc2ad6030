-- The row source of an enqueue call: one row per task, options shared.
SELECT r.id, %(queue)s::text AS queue, r.key, r.payload,
       %(run_at)s::timestamptz AS run_at, %(delay_s)s::float8 AS delay_s,
       %(priority)s::int4 AS priority, %(max_attempts)s::int4 AS max_attempts,
       %(group)s::text AS task_group, %(trace_context)s::text AS trace_context
FROM unnest(%(ids)s::uuid[], %(keys)s::text[], %(payloads)s::jsonb[]) AS r(id, key, payload)
