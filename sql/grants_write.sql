-- shardq migrate --grants ROLE: what workers and producers do besides reading.  They
-- write tasks, results, attempts, workers, figures, schedules, flows and flows' events
-- (producers write flows, acks events; resolvers update flows and delete events):
-- every table of the schema, and those later revisions make; and use its sequences,
-- should a revision make one (there is none today).
GRANT INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA shardq TO {role};
GRANT USAGE, SELECT, UPDATE ON ALL SEQUENCES IN SCHEMA shardq TO {role};
ALTER DEFAULT PRIVILEGES FOR ROLE {owner} IN SCHEMA shardq
    GRANT INSERT, UPDATE, DELETE ON TABLES TO {role};
ALTER DEFAULT PRIVILEGES FOR ROLE {owner} IN SCHEMA shardq
    GRANT USAGE, SELECT, UPDATE ON SEQUENCES TO {role}
