-- Whether this role holds MAINTAIN on shardq.tasks (PostgreSQL 17+: VACUUM, REINDEX).
SELECT has_table_privilege('shardq.tasks', 'MAINTAIN')
