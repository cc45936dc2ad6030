-- Whether a task is suspect: its last lease expired without a result (the janitor's
-- mark, rescue_set), or its handler's process died when it last ran as a suspect
-- (shardq/worker/isolation.py).  Unqualified, so that it reads the row the statement
-- is on.
(last_error IS NOT NULL
 AND (last_error LIKE 'lease expired:%%' OR last_error LIKE 'process died:%%'))
