-- A live session by its id's hash: not past its absolute expiry, and seen within its
-- idle limit; "stale" says it was last touched touch_s ago or more (session_touch).
SELECT actor, role, credential, csrf,
       seen_at <= coalesce(%(now)s::timestamptz, now()) - %(touch_s)s * interval '1 second'
FROM shardq.sessions
WHERE id = %(id)s
  AND expires_at > coalesce(%(now)s::timestamptz, now())
  AND seen_at > coalesce(%(now)s::timestamptz, now()) - idle_s * interval '1 second'
