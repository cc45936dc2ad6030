"""Benchmarks of shardq on PostgreSQL (run as ``python -m bench.<name>``)."""
