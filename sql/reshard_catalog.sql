-- What of a layout exists on shardq.tasks: the state of each named index (valid, or
-- left invalid by an interrupted CREATE INDEX CONCURRENTLY), whether the primary key
-- still leads with the stored bucket column, and whether that column is still there.
SELECT (SELECT coalesce(jsonb_object_agg(c.relname, i.indisvalid), jsonb_build_object())
        FROM pg_index AS i JOIN pg_class AS c ON c.oid = i.indexrelid
        WHERE i.indrelid = 'shardq.tasks'::regclass AND c.relname = ANY(%(names)s::text[]))
           AS indexes,
       EXISTS (SELECT 1 FROM pg_constraint
               WHERE conrelid = 'shardq.tasks'::regclass AND conname = 'tasks_pkey')
           AS bucket_key,
       EXISTS (SELECT 1 FROM pg_attribute
               WHERE attrelid = 'shardq.tasks'::regclass AND attname = 'bucket'
                 AND NOT attisdropped)
           AS bucket_column
