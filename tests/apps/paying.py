"""A test app whose task masks its card numbers (``redact``): the dashboard loads it with
``--app``."""

from __future__ import annotations

import shardq

app = shardq.App()


@app.task(queue="payments", redact=["card"])
def charge(card: str, amount: int) -> None:
    """Decline every card, quoting it (as careless code does)."""
    raise ValueError(f"card {card} declined for {amount}")
