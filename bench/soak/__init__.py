"""The soak test: hours of steady load on two databases, with and without the janitor's
vacuum step (``python -m bench.soak``)."""
