-- Open a dashboard session: its id is a hash of the cookie's random value, so a reader
-- of this table cannot log in with a row.  It ends idle_s after it was last seen, or
-- at expires_at, whichever comes first.
INSERT INTO shardq.sessions
    (id, actor, role, credential, csrf, address, created_at, seen_at, idle_s, expires_at)
VALUES (%(id)s, %(actor)s, %(role)s, %(credential)s, %(csrf)s, %(address)s,
        coalesce(%(now)s::timestamptz, now()), coalesce(%(now)s::timestamptz, now()),
        %(idle_s)s, coalesce(%(now)s::timestamptz, now()) + %(max_s)s * interval '1 second')
