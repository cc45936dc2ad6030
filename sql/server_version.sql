-- The server's version string: it tells PostgreSQL from CockroachDB (shardq.dialect).
SELECT version()
