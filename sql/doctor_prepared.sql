-- shardq doctor: the server session that ran this, and a token to tell it from another
-- client's prepared statement of the same name (run prepared through a pooler).
SELECT pg_backend_pid(), %(token)s::text
