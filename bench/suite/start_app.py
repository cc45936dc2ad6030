"""The handler of the from-process-start drain (:mod:`bench.suite.from_start`), in a module
of its own that imports nothing heavy: ``shardq consume`` imports it, and its start-up
is what the scenario measures.

``counted`` is a no-op that counts the tasks it started and prints ``FIRST <epoch>``
at the first, ``TENTH <epoch>`` at a tenth of ``$SHARDQ_BENCH_DRAIN_TARGET`` and
``DRAINED <epoch>`` at the target, on stderr.
"""

from __future__ import annotations

import itertools
import os
import sys
import time
from typing import Any

TARGET_ENV = "SHARDQ_BENCH_DRAIN_TARGET"

_started = itertools.count(1)  # next() on a count is atomic under the GIL: no lock per task
_target = int(os.environ.get(TARGET_ENV, "0") or 0)
_marks = {1: "FIRST", max(2, _target // 10): "TENTH", _target: "DRAINED"}


def counted(payload: Any) -> None:
    """A no-op that says when it started the first task, a tenth of them and the last."""
    del payload
    mark = _marks.get(next(_started))
    if mark:
        print(f"{mark} {time.time():.6f}", file=sys.stderr, flush=True)
