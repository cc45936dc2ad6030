-- What of a layout exists on shardq.tasks: its named indexes (a CockroachDB index is
-- listed once its backfill is done; a build cut short is finished or rolled back by
-- its job).  The primary key keeps its hash buckets: no stored column to retire.
SELECT (SELECT coalesce(json_object_agg(i.index_name, true)::jsonb, '{{}}'::jsonb)
        FROM (SELECT DISTINCT index_name FROM information_schema.statistics
              WHERE table_schema = 'shardq' AND table_name = 'tasks'
                AND index_name = ANY(%(names)s::text[])) AS i)
           AS indexes,
       false AS bucket_key,
       false AS bucket_column
