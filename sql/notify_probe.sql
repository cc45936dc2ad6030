-- shardq doctor: one notification on its own channel, to see that LISTEN hears it.
SELECT pg_notify(%(channel)s, %(payload)s)
