-- Every role's grants, on a schema at revision 0028 or later (grants_dashboard_ready):
-- a dashboard's role, even one that changes no task, keeps its login sessions and
-- records refused actions and failed logins in the audit trail, so it writes those two
-- tables (a read-write role writes them already).
GRANT INSERT, UPDATE, DELETE ON TABLE shardq.sessions TO {role};
GRANT INSERT ON TABLE shardq.audit TO {role}
