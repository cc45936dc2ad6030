-- CockroachDB has no session locks: a reshard takes none (run one at a time); each
-- step's update of shardq.layout is conditional on the phase and generation it read.
SELECT true
