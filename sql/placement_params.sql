-- The placement source for one enqueue call: its options as bound parameters.
SELECT %(run_at)s::timestamptz AS run_at, %(delay_s)s::float8 AS delay_s,
       %(priority)s::int4 AS priority
