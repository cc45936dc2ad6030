"""The queue's operations: enqueue, claim, settle, keys, control, dead letters, reading
tasks and queue figures back, and the janitor's, periodic schedules' and vacuum step's
work.  Each module takes a :class:`shardq.core.statements.Statements`."""
