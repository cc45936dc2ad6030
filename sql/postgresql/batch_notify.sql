-- A batch's wake-up call for idle workers, as a column of its placement statement:
-- with notify, workers LISTENing on channel 'shardq' hear the queue's name when the
-- batch's transaction commits (and never when it rolls back), so it can be sent
-- before the rows without a round trip of its own.
(SELECT pg_notify('shardq', %(queue)s) WHERE %(notify)s)
