"""The app the chords benchmark (:mod:`bench.chords`) runs in its worker processes: a
module of its own, so that they import nothing of the harness.

Every task is on the suite's queue (``bench``).  :func:`fan_in` records when it started
(the machine's clock) and when it was claimed (the database's clock, from its lease) as
a line of its process's file in :func:`records_dir`: a file, not a table, so that the
measurement adds no statement to the database it measures.
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path
from typing import Any

from psycopg.conninfo import conninfo_to_dict

import shardq

QUEUE = "bench"
LEASE_S = 60.0  # fan_in's lease: its claim's time is its lease's end less this

app = shardq.App()


def records_dir(dsn: str) -> Path:
    """Where the callbacks of the database ``dsn`` record their runs (one file per process)."""
    name = conninfo_to_dict(dsn).get("dbname", "shardq")
    return Path(tempfile.gettempdir()) / f"shardq-bench-chords-{name}"


@app.task(queue=QUEUE)
def noop(n: int) -> None:
    """A plain task, or a chord's member: the work is nothing."""


@app.task(queue=QUEUE, keep_result_s=86_400)
def kept(n: int) -> None:
    """A plain task whose result (None) is kept, as a chord's member's is."""


@app.task(queue=QUEUE)
def gather(results: list[Any]) -> None:
    """A chord's callback that does nothing with its members' results."""


_out: int | None = None  # this process's record file, opened at the first record


@app.task(queue=QUEUE, lease_s=LEASE_S)
def fan_in(results: list[Any], chord: int) -> None:
    """Chord number ``chord``'s callback: records its start and its claim."""
    global _out
    started = time.time()
    claimed = shardq.current().task.exec_time.timestamp() - LEASE_S
    if _out is None:
        folder = records_dir(os.environ["SHARDQ_DSN"])
        folder.mkdir(exist_ok=True)
        _out = os.open(folder / f"{os.getpid()}.tsv", os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    # One write of one short line to an O_APPEND file: handler threads never interleave.
    os.write(_out, f"{chord}\t{started}\t{claimed}\t{len(results)}\n".encode())
