"""This tree against an earlier revision on the same workload (``python -m bench.versions``)."""
