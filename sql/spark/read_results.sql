-- The kept results of succeeded tasks (shardq.results) in read_tasks's columns, the
-- dbtable of Spark's JDBC reader: state 'succeeded', the handler's return value as
-- result (or why it was not kept as last_error).  A result past its expiry counts as
-- gone, whether or not the janitor has deleted it yet.  One partition: the table has
-- no bucket, and its rows are small.
(SELECT r.id::text AS id, r.queue, 'succeeded' AS status, 'succeeded' AS state,
        NULL::text AS payload, NULL::text AS key, NULL::integer AS priority, r.attempts,
        NULL::integer AS max_attempts, r.error AS last_error, r.value::text AS result,
        r.enqueued_at, NULL::timestamptz AS exec_time, NULL::timestamptz AS first_claimed_at,
        NULL::timestamptz AS last_claimed_at, r.finished_at
 FROM shardq.results AS r
 WHERE r.expires_at > now()) AS shardq_results
