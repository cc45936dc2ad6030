-- Released nodes' wake-up call for idle workers, as a column of a statement that
-- returns one row per queue (`queue`): with notify, workers LISTENing on channel
-- 'shardq' hear the queue's name at commit.
(SELECT pg_notify('shardq', queue) WHERE %(notify)s)
