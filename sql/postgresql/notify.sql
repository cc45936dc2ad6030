-- Wake workers LISTENing on channel 'shardq' for this queue (delivered at commit).
SELECT pg_notify('shardq', %(queue)s)
