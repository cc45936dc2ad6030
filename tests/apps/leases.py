"""A test app with queues of different leases, and tasks that run as suspects.

Suspect tasks run in a process of their own, which imports their handler: so these
live in a module, not in a test.  Every run is recorded in the table ``runs`` of
SHARDQ_DSN's database (see :mod:`tests.apps.recorder`).
"""

from __future__ import annotations

import os
import signal
import time

import shardq
from tests.apps.recorder import _record, _run_for

app = shardq.App()


@app.task(queue="short", lease_s=3)
def short(n: int, seconds: float) -> None:
    """Work for ``seconds`` under a 3 s lease."""
    _run_for(n, seconds)


@app.task(queue="long", lease_s=60)
def long(n: int, seconds: float) -> None:
    """Work for ``seconds`` under a 60 s lease."""
    _run_for(n, seconds)


@app.task(queue="iso", max_attempts=2)
def crash(n: int) -> None:
    """Record the run, then kill the process running it, as a segfault would (unless that
    is the test's own process: then the suspect was not isolated, and this raises)."""
    if str(os.getpid()) == os.environ.get("SHARDQ_TEST_PID"):
        raise RuntimeError("a suspect ran in the test's own process")
    _record(n, time.time(), "crashing")
    os.kill(os.getpid(), signal.SIGKILL)


@app.task(queue="iso")
def fails(n: int) -> None:
    """Record the run, then raise."""
    _record(n, time.time(), "raised")
    raise ValueError(f"bad input {n}")
