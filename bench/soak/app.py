"""The app the soak runs: a no-op task that records its pickup latency.

Each task carries ``t``, the epoch second it became due (its enqueue time, or its
``run_at`` for a delayed task).  Handlers keep ``now - t`` in memory and a thread
writes them to ``soak.pickup`` every few seconds as one array per row, so the
measurement adds a write every few seconds, not one per task.
"""

from __future__ import annotations

import os
import threading
import time

import psycopg

import shardq

app = shardq.App()
QUEUE = "soak"
FLUSH_S = 5.0
PICKUP_TABLE = "CREATE TABLE IF NOT EXISTS soak.pickup (at float8 NOT NULL, ms float4[] NOT NULL)"

_lock = threading.Lock()
_latencies: list[float] = []
_flusher: threading.Thread | None = None


def _flush_forever() -> None:
    with psycopg.connect(os.environ["SHARDQ_DSN"], autocommit=True) as conn:
        while True:
            time.sleep(FLUSH_S)
            with _lock:
                batch = _latencies[:]
                _latencies.clear()
            if batch:
                conn.execute("INSERT INTO soak.pickup VALUES (%s, %s)", (time.time(), batch))


@app.task(queue=QUEUE)
def work(t: float) -> None:
    """Does nothing but note how long after ``t`` it started."""
    global _flusher
    ms = (time.time() - t) * 1000
    with _lock:
        _latencies.append(ms)
        if _flusher is None:
            _flusher = threading.Thread(target=_flush_forever, name="soak-pickup", daemon=True)
            _flusher.start()
