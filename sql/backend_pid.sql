-- The server process serving this session (a transaction pooler changes it between
-- transactions).
SELECT pg_backend_pid()
