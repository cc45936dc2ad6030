"""``python -m bench``: the benchmark suite (see :mod:`bench.suite.cli`)."""

from bench.suite.cli import main

raise SystemExit(main())
