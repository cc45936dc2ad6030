"""Durable tasks measured side by side with plain ones (``python -m bench.durable``)."""
