"""The queue's operations, each a function over :class:`shardq.core.statements.Statements`
that makes a :class:`~shardq.core.plan.Plan`: enqueue, claim, flow control, settle,
keys, control, dead letters, results, reading tasks, figures and throughput back, and
the janitor's statements.  Both clients and the blocking loops
(:mod:`shardq.loops`) run them."""
