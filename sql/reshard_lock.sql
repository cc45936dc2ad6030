-- One reshard at a time: a session lock, which a killed process or a lost connection
-- gives up with its session.  The key is fixed (hashtext of a name of shardq's own).
SELECT pg_try_advisory_lock(hashtext('shardq.reshard'))
