-- Remove shardq.tasks' dead row versions and their index entries.  Not in a
-- transaction block (the pool's connections are autocommit); SKIP_LOCKED: a table
-- being altered is left for the next step; no truncation, which would lock claims out.
VACUUM (SKIP_LOCKED, TRUNCATE false) shardq.tasks
