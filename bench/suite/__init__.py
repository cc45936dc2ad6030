"""The shardq benchmark suite: shardq against PGQueuer, Procrastinate and a raw-SQL ceiling.

Run it with ``python -m bench`` (``--quick`` for a small smoke run); see
:mod:`bench.suite.cli` for the options and ``bench/results/suite/`` for the report.
"""
