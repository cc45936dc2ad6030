-- Insert one task; the database generates its id and bucket.  With notify, idle
-- workers LISTENing on channel 'shardq' hear the queue's name at commit
-- (PostgreSQL folds identical notifications of one transaction into one).
WITH ins AS (
    INSERT INTO shardq.tasks
        (queue, payload, exec_time, priority, pending_head_start_s, max_attempts, enqueued_at)
    SELECT %(queue)s, %(payload)s, p.exec_time, %(priority)s, p.pending_head_start_s,
           %(max_attempts)s, p.now
    FROM ({source}) AS src CROSS JOIN LATERAL ({placement}) AS p
    RETURNING id
)
SELECT ins.id, (SELECT pg_notify('shardq', %(queue)s) WHERE %(notify)s) AS notified
FROM ins
