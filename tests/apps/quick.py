"""A test app of quick tasks: one that does nothing, one that keeps what it returns."""

from __future__ import annotations

import shardq

app = shardq.App()


@app.task(queue="quick")
def nothing(n: int) -> None:
    """Do nothing."""


@app.task(queue="echo", keep_result_s=600)
def echo(n: int) -> int:
    """Return ``n``, kept as the task's result."""
    return n
