"""The handler the flow-control benchmark (:mod:`bench.flow`) runs in its worker
processes: a module of its own, so that they import nothing of the harness."""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path
from typing import Any

from psycopg.conninfo import conninfo_to_dict

from shardq.handler import current


def records_dir(dsn: str) -> Path:
    """Where the handlers of the database ``dsn`` record their runs (one file per process)."""
    name = conninfo_to_dict(dsn).get("dbname", "shardq")
    return Path(tempfile.gettempdir()) / f"shardq-bench-flow-{name}"


_out: int | None = None  # this process's record file, opened at the first record


def task(payload: dict[str, Any]) -> None:
    """A raw handler: sleeps ``payload['s']`` seconds, and when ``payload['rec']`` records
    its start and end (machine clock, as the harness reads it), group ``g`` and lease end
    as a line of its process's file in :func:`records_dir`.  A file, not a table: a
    database round trip would lengthen every measured task and load the server the
    measurement is about."""
    global _out
    started = time.time()
    time.sleep(float(payload.get("s", 0.0)))
    if payload.get("rec"):
        finished = time.time()
        # The lease's end, on the database's clock: the claim's time plus the lease (the
        # same for every task), so claims per second can be counted as starts are.
        lease_end = current().task.exec_time.timestamp()
        if _out is None:
            folder = records_dir(os.environ["SHARDQ_DSN"])
            folder.mkdir(exist_ok=True)
            _out = os.open(folder / f"{os.getpid()}.tsv", os.O_WRONLY | os.O_CREAT | os.O_APPEND)
        # One write of one short line to an O_APPEND file: handler threads never interleave.
        os.write(_out, f"{started}\t{finished}\t{payload.get('g') or ''}\t{lease_end}\n"
                 .encode())
