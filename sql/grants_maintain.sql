-- shardq migrate --grants ROLE, PostgreSQL 17+: VACUUM and REINDEX of shardq.tasks
-- without owning it, as the janitor's vacuum step does between autovacuum's runs.
GRANT MAINTAIN ON TABLE shardq.tasks TO {role}
