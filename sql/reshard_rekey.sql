-- The primary key moves from (bucket, queue, status, exec_time, id) to the id, whose
-- unique index tasks_ids exists (migration 0010): a catalog change, no scan.
ALTER TABLE shardq.tasks DROP CONSTRAINT tasks_pkey,
    ADD CONSTRAINT tasks_ids PRIMARY KEY USING INDEX tasks_ids
