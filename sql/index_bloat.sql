-- shardq.tasks' indexes: name, bytes, entries, an estimate of the bytes one entry needs
-- (the indexed columns' average widths from pg_stats, 16 when not analyzed, plus 16 for
-- the tuple header and line pointer), and whether the index is valid (a REINDEX
-- CONCURRENTLY cut short leaves an invalid copy).  Entries are the index's count as of
-- its last vacuum, analyze or build, and for an index of every row (not a partial one)
-- at least the rows the statistics count live now: a table filled since its last
-- vacuum would otherwise look as if its full indexes held nothing, and be rebuilt for
-- nothing.
SELECT c.relname, pg_relation_size(c.oid),
       greatest(c.reltuples, CASE WHEN i.indpred IS NULL THEN s.n_live_tup END, 0)::float8,
       coalesce((SELECT sum(st.avg_width) FROM pg_attribute AS a
                 JOIN pg_stats AS st ON st.schemaname = 'shardq' AND st.tablename = 'tasks'
                                    AND st.attname = a.attname
                 WHERE a.attrelid = i.indrelid AND a.attnum = ANY (i.indkey)), 16)::float8
         + 16,
       i.indisvalid
FROM pg_index AS i
JOIN pg_class AS c ON c.oid = i.indexrelid
LEFT JOIN pg_stat_user_tables AS s ON s.relid = i.indrelid
WHERE i.indrelid = 'shardq.tasks'::regclass
ORDER BY 1
