"""What recording each attempt costs, against the release before it (``python -m
bench.history``)."""
