-- PgBouncer's admin console: its databases and their pools (name, host, port, database,
-- force_user, pool_size, ..., pool_mode, ...).
SHOW DATABASES
