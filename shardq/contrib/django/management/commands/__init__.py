"""``manage.py shardq_worker`` and ``manage.py shardq_migrate``."""
