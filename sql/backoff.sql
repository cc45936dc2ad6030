least(%(backoff_cap_s)s::float8, %(backoff_base_s)s::float8 * power(2::float8, least(t.attempts, 60)))
    * (1 - %(backoff_jitter)s::float8 * random()) * interval '1 second'
