-- Whether the schema has the dashboard's sessions and audit trail (revision 0028 on),
-- which grants_dashboard grants the writing of.
SELECT to_regclass('shardq.sessions') IS NOT NULL AND to_regclass('shardq.audit') IS NOT NULL
