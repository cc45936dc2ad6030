"""The ``shardq consume`` worker: claimers, handler slots, acks, heartbeats, janitors."""
