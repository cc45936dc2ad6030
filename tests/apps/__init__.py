"""Apps that the worker tests run in real ``shardq consume`` processes."""
