"""The management commands of shardq.contrib.django."""
