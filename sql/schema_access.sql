-- First contact found no column of shardq.tasks: information_schema shows a role only
-- what it has privileges on, so look in the catalog for why.  The schema's owner, this
-- role, and whether it may use the schema and read the table (no row: no schema).
SELECT pg_get_userbyid(n.nspowner) AS owner, current_user AS role,
       has_schema_privilege(n.oid, 'USAGE') AS usage,
       c.oid IS NULL OR has_table_privilege(c.oid, 'SELECT') AS reads
FROM pg_namespace AS n
LEFT JOIN pg_class AS c ON c.relnamespace = n.oid AND c.relname = 'tasks'
WHERE n.nspname = 'shardq'
