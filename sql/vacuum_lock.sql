-- One janitor maintains shardq.tasks at a time: a session lock, released by
-- vacuum_unlock (or by the session's end, should its connection be lost).
SELECT pg_try_advisory_lock(%(lock_key)s::bigint)
