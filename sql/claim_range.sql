-- One bucket's due tasks of a queue without flow control: one index range of the
-- primary key.  A queue with limits (shardq.queues) or with waiting grouped tasks
-- (the partial index tasks_groups_waiting) is claimed by claim_limited instead, and
-- this claim takes nothing from it: both probes name no column of the row, so each
-- runs once per statement, and a worker that has not yet learnt of a new limit
-- cannot claim past it.  The bucket is the bound one (this_bucket: bucket_bound), or
-- each listed one in turn in a claim of several (bucket_listed).
{bucket} = {this_bucket}
      AND queue = %(queue)s
      AND status = 'available'
      AND exec_time <= coalesce(%(now)s::timestamptz, now())
      AND NOT EXISTS (
          SELECT 1 FROM shardq.queues AS limited
          WHERE limited.name = %(queue)s
            AND (limited.max_running IS NOT NULL OR limited.max_running_per_group IS NOT NULL
                 OR limited.rate_count IS NOT NULL OR limited.rate_per_group_count IS NOT NULL))
      AND NOT EXISTS (
          SELECT 1 FROM shardq.tasks AS grouped
          WHERE grouped.queue = %(queue)s AND grouped.status = 'available'
            AND grouped.task_group IS NOT NULL)
