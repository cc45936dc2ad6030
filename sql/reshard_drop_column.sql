-- The stored bucket column, which nothing reads once the layout is an expression: a
-- catalog change (the column is marked dropped; its space is reclaimed as rows are
-- rewritten).
ALTER TABLE shardq.tasks DROP COLUMN IF EXISTS bucket
