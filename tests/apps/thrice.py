"""A test app whose task fails its first two attempts and succeeds at its third; each
failure names the attempt and the process that ran it."""

from __future__ import annotations

import os

import shardq

app = shardq.App()


@app.task(queue="thrice")
def thrice(n: int) -> None:
    """Fail attempts 1 and 2, saying which process ran them; succeed at 3."""
    attempt = shardq.current().task.attempts
    if attempt < 3:
        raise RuntimeError(f"attempt {attempt} of task {n} failed in pid {os.getpid()}")
