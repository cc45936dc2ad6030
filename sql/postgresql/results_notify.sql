-- The wake-up call of clients waiting for results, as a column of ack_results: each
-- result kept is announced on channel 'shardq_results' with its task's id, delivered
-- when the ack commits (shardq.ops.results listens there).  A task of a flow that
-- others wait for is not announced: its result is for them (a chord's members would
-- be as many notifications, each one queued at commit), and a client that waits for
-- it anyway sees it at its next look (shardq.ops.results.RECHECK_S).
(SELECT count(pg_notify('shardq_results', kept.id::text))
 FROM kept
 WHERE kept.id NOT IN (SELECT done.id FROM done WHERE done.flow_next IS NOT NULL))
