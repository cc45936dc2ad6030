"""Pure functions of time and figures, with no I/O: when periodic slots fall
(:mod:`shardq.maths.cadence`) and forecasts from a queue's counts and rates
(:mod:`shardq.maths.forecast`)."""
