"""Blocking loops a worker runs beside its claimers: the janitor, periodic schedules and
the vacuum step, each a :class:`shardq.core.loop.Loop` over
:class:`shardq.core.statements.Statements`."""
