"""The handler the flow-control benchmark (:mod:`bench.flow`) runs in its worker
processes: a module of its own, so that they import nothing of the harness."""

from __future__ import annotations

import os
import threading
import time
from typing import Any

import psycopg

from shardq.handler import current

_local = threading.local()


def task(payload: dict[str, Any]) -> None:
    """A raw handler: sleeps ``payload['s']`` seconds, and when ``payload['rec']`` records
    its start and end, group ``g`` and lease end in bench_flow_starts through a connection of its
    thread (machine clock, as the harness reads it)."""
    started = time.time()
    time.sleep(float(payload.get("s", 0.0)))
    if payload.get("rec"):
        conn = getattr(_local, "conn", None)
        if conn is None:
            conn = _local.conn = psycopg.connect(os.environ["SHARDQ_DSN"], autocommit=True)
        # The lease's end, on the database's clock: the claim's time plus the lease (the
        # same for every task), so claims per second can be counted as starts are.
        lease_end = current().task.exec_time.timestamp()
        conn.execute("INSERT INTO bench_flow_starts VALUES (%s, %s, %s, %s)",
                     (started, time.time(), payload.get("g"), lease_end))
