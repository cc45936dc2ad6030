"""The ``shardq`` command line: :mod:`shardq.cli.main` (the parser and the commands that
run a process), :mod:`shardq.cli.ops` (the operator's commands), :mod:`shardq.cli.table`
(the terminal's queue table), :mod:`shardq.cli.doctor` and :mod:`shardq.cli.demo`."""
