-- Give the reshard's session lock back as the reshard ends, before its connection
-- closes: a server session ends a moment after its client closes it, and a reshard
-- run again at once must not find the lock still held.
SELECT pg_advisory_unlock(hashtext('shardq.reshard'))
