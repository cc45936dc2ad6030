-- Set a queue's limits (NULL: none).  A rate's state is kept while its period and
-- count stay as they were; a changed rate starts afresh.
INSERT INTO shardq.queues AS q
    (name, max_running, max_running_per_group, rate_count, rate_period_s, rate_burst,
     rate_per_group_count, rate_per_group_period_s, rate_per_group_burst)
VALUES (%(queue)s, %(max_running)s, %(max_running_per_group)s, %(rate_count)s,
        %(rate_period_s)s, %(rate_burst)s, %(rate_per_group_count)s,
        %(rate_per_group_period_s)s, %(rate_per_group_burst)s)
ON CONFLICT (name) DO UPDATE SET
    max_running = EXCLUDED.max_running,
    max_running_per_group = EXCLUDED.max_running_per_group,
    rate_tat = CASE WHEN q.rate_count IS NOT DISTINCT FROM EXCLUDED.rate_count
                     AND q.rate_period_s IS NOT DISTINCT FROM EXCLUDED.rate_period_s
                    THEN q.rate_tat END,
    rate_count = EXCLUDED.rate_count,
    rate_period_s = EXCLUDED.rate_period_s,
    rate_burst = EXCLUDED.rate_burst,
    rate_per_group_count = EXCLUDED.rate_per_group_count,
    rate_per_group_period_s = EXCLUDED.rate_per_group_period_s,
    rate_per_group_burst = EXCLUDED.rate_per_group_burst
