-- The wake-up call of clients waiting for results, as a column of ack_results: each
-- result kept is announced on channel 'shardq_results' with its task's id, delivered
-- when the ack commits (shardq.ops.results listens there).
(SELECT count(pg_notify('shardq_results', kept.id::text)) FROM kept)
