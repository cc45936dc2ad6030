-- shardq.tasks' indexes: name, bytes, entries (as of the last vacuum or analyze), an
-- estimate of the bytes one entry needs (the indexed columns' average widths from
-- pg_stats, 16 when not analyzed, plus 16 for the tuple header and line pointer), and
-- whether the index is valid (a REINDEX CONCURRENTLY cut short leaves an invalid copy).
SELECT c.relname, pg_relation_size(c.oid), greatest(c.reltuples, 0)::float8,
       coalesce((SELECT sum(s.avg_width) FROM pg_attribute AS a
                 JOIN pg_stats AS s ON s.schemaname = 'shardq' AND s.tablename = 'tasks'
                                   AND s.attname = a.attname
                 WHERE a.attrelid = i.indrelid AND a.attnum = ANY (i.indkey)), 16)::float8
         + 16,
       i.indisvalid
FROM pg_index AS i
JOIN pg_class AS c ON c.oid = i.indexrelid
WHERE i.indrelid = 'shardq.tasks'::regclass
ORDER BY 1
