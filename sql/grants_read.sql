-- shardq migrate --grants ROLE --read-only, and the first part of every role's grants:
-- the use of the schema, reading its tables and the revision Alembic recorded, and
-- reading the tables later revisions make (when the schema's owner runs them).
GRANT USAGE ON SCHEMA shardq TO {role};
GRANT SELECT ON ALL TABLES IN SCHEMA shardq TO {role};
GRANT SELECT ON TABLE shardq_alembic_version TO {role};
ALTER DEFAULT PRIVILEGES FOR ROLE {owner} IN SCHEMA shardq GRANT SELECT ON TABLES TO {role}
