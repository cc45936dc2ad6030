"""Flow control measured with ``shardq consume`` worker processes: the measurements
(:mod:`bench.flow.run`), the handlers (:mod:`bench.flow.app`), what is observed
(:mod:`bench.flow.observe`) and the report (:mod:`bench.flow.report`)."""
