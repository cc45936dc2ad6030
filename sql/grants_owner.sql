-- shardq migrate --grants: the schema shardq's owner, this role, whether it may grant
-- the schema's use (its owner, a member of the owning role, or a superuser), whether the
-- role to be granted exists, and the server's version (MAINTAIN exists from PostgreSQL
-- 17).  No row: there is no schema shardq.
SELECT pg_get_userbyid(n.nspowner) AS owner, current_user AS role,
       pg_has_role(n.nspowner, 'USAGE') AS may_grant,
       EXISTS (SELECT 1 FROM pg_roles WHERE rolname = %(grantee)s) AS grantee_exists,
       current_setting('server_version_num')::int AS version
FROM pg_namespace AS n
WHERE n.nspname = 'shardq'
