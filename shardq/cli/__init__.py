"""The ``shardq`` command line: :mod:`shardq.cli.main` (the parser),
:mod:`shardq.cli.commands` (the commands that run a process's work), :mod:`shardq.cli.ops`
(the operator's commands), :mod:`shardq.cli.table` (the terminal's queue table),
:mod:`shardq.cli.doctor` and :mod:`shardq.cli.demo`."""
