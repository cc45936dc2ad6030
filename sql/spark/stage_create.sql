-- The staging table of one write_tasks call: Spark appends rows to it over JDBC, the
-- driver merges them into shardq.tasks in one transaction and drops it.  Unlogged
-- (CockroachDB accepts the word and makes a plain table): its rows are rewritten into
-- shardq.tasks, so nothing in it needs to survive a crash.
-- seq is the row's position in the DataFrame (the last row of a key wins); run_at_us
-- is the not-before time in microseconds since the Unix epoch, a plain number that no
-- JVM or session time zone can shift.  trace_context is the optional W3C traceparent
-- a row's task is traced under (NULL when the DataFrame has no such column).
CREATE UNLOGGED TABLE {stage} (
    seq bigint NOT NULL,
    id uuid NOT NULL DEFAULT gen_random_uuid(),
    queue text NOT NULL,
    key text,
    payload jsonb NOT NULL,
    run_at_us bigint,
    priority integer NOT NULL,
    max_attempts integer NOT NULL,
    task_group text,
    trace_context text
)
