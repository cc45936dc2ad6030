"""Several ``shardq consume`` daemons on one periodic schedule: each slot runs once."""

from __future__ import annotations

import itertools
import os
import time
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path

import psycopg
import pytest

from tests.apps import ticker
from tests.conftest import Databases
from tests.daemons import Daemon
from tests.helpers import query, wait_for

ROOT = Path(__file__).resolve().parent.parent
SLOT = timedelta(seconds=2)


@pytest.fixture
def ticks_db(databases: Databases) -> str:
    url = databases.create()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(ticker.SETUP)
    return url


@pytest.fixture
def daemons(ticks_db: str) -> Iterator[Callable[[], Daemon]]:
    env = {**os.environ, "SHARDQ_DSN": ticks_db, "PYTHONPATH": str(ROOT)}
    started: list[Daemon] = []

    def start() -> Daemon:
        started.append(Daemon(env, "tests.apps.ticker:app", "--claimers", "1",
                              "--concurrency", "2"))
        return started[-1]

    yield start
    for d in started:
        if d.proc.poll() is None:
            d.proc.kill()
            d.wait()


def stop(daemon: Daemon) -> None:
    code, out = daemon.stop(), daemon.output
    assert code == 0, out


def test_three_daemons_fire_every_slot_once(ticks_db: str,
                                            daemons: Callable[[], Daemon]) -> None:
    """Three daemons for ~16 s on a 2 s schedule, one stopped halfway: every slot between
    the first and the last ran exactly once."""
    trio = [daemons() for _ in range(3)]
    # Timed from their start, not their launch: on a loaded machine a daemon's imports
    # can take seconds, and a SIGTERM before its handlers are set kills it.
    wait_for(lambda: all(d.saw("consuming ") for d in trio), 60, what="three daemons")
    time.sleep(8)
    stop(trio[0])
    time.sleep(8)
    for d in trio[1:]:
        stop(d)
    ran = [row[0] for row in query(ticks_db, "SELECT slot FROM ticks ORDER BY slot")]
    runs = Counter(ran)
    slots = sorted(runs)
    expected = [slots[0] + k * SLOT for k in range((slots[-1] - slots[0]) // SLOT + 1)]
    gaps = [b - a for a, b in itertools.pairwise(slots)]
    pids = {r[0] for r in query(ticks_db, "SELECT pid FROM ticks")}
    print(f"slots expected {len(expected)}, ran {len(slots)}, runs {len(ran)}, "
          f"duplicates {len(ran) - len(slots)}, longest gap {max(gaps)}, by {len(pids)} daemons")
    assert [s for s, n in runs.items() if n > 1] == []
    assert slots == expected
    assert len(slots) >= 4  # ~14 s of firing, less the daemons' start on a busy machine
    # Fired, each once: what is still queued (fired as the daemons stopped) is later.
    queued = [r[0] for r in query(ticks_db, "SELECT (payload->>'slot')::timestamptz "
                                            "FROM shardq.tasks")]
    assert all(s > slots[-1] for s in queued)
    assert len(set(queued)) == len(queued)
