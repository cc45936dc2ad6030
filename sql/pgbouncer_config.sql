-- PgBouncer's admin console (database pgbouncer): its settings, one row each (key, value,
-- default, changeable).
SHOW CONFIG
