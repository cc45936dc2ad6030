-- The session that holds the reshard's lock: its backend's pid, what it runs and for
-- how long (a reshard whose process was killed keeps its session until the statement
-- it sent ends).
SELECT a.pid, a.state, left(regexp_replace(a.query, '^(\s*--[^\n]*\n)*\s*', ''), 40) AS query,
       extract(epoch FROM now() - a.query_start)::float8 AS running_s
FROM pg_locks AS l JOIN pg_stat_activity AS a ON a.pid = l.pid
WHERE l.locktype = 'advisory' AND l.granted
  AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
  AND l.objid = (hashtext('shardq.reshard')::int8 & 4294967295)::oid
