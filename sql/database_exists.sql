-- The embedded server: whether the database shardq uses exists yet.
SELECT 1 FROM pg_database WHERE datname = %(name)s
