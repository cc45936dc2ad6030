"""``shardq consume`` drain and pickup latency (``python -m bench.daemon``)."""
