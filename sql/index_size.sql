SELECT pg_relation_size(to_regclass(%(index)s))
