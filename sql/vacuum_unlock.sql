SELECT pg_advisory_unlock(%(lock_key)s::bigint)
