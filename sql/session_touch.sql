-- A session was used: its idle limit counts from now.  The dashboard touches a session
-- at most once a minute, not on every request (its pages refresh every few seconds).
UPDATE shardq.sessions SET seen_at = coalesce(%(now)s::timestamptz, now())
WHERE id = %(id)s
