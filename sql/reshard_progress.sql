-- An index build under way on shardq.tasks (pg_stat_progress_create_index): which
-- index, its phase, and the blocks and tuples done of those to do.
SELECT c.relname AS index, p.phase, p.blocks_done, p.blocks_total, p.tuples_done,
       p.tuples_total
FROM pg_stat_progress_create_index AS p
LEFT JOIN pg_class AS c ON c.oid = p.index_relid
WHERE p.datname = current_database() AND p.relid = 'shardq.tasks'::regclass
