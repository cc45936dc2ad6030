"""A Django project whose tasks run on shardq (run from this directory: manage.py)."""
