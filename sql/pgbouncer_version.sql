-- PgBouncer's admin console: its version ("PgBouncer 1.18.0").
SHOW VERSION
