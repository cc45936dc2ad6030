"""Integrations of shardq with frameworks: :mod:`shardq.contrib.django`."""
